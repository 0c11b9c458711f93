"""The message inside an engine's or gateway's error body.

vLLM up to 0.10.0 sends a flat `{"object": "error", "message", "type", "code"}`, from
0.10.1 a nested `{"error": {"message", "type", "code"}}` (OpenAI's shape, also used by
Ollama's OpenAI routes). TGI sends `{"error": "...", "error_type": "..."}`, Ollama's
native API `{"error": "..."}`, FastAPI `{"detail": ...}`, nginx an HTML page.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")
# Control characters (terminal escapes and the like) never reach a page or a log line.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_MESSAGE = 300


def _nested(error: dict[str, Any]) -> str:
    message = str(error.get("message", "")).strip()
    kind = error.get("type") or error.get("code")
    return f"{kind}: {message}" if kind and message else message or json.dumps(error)[:MAX_MESSAGE]


def message_from_json(data: Any) -> str | None:
    """The message of a parsed error object, or None when it is not an error shape."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        return _nested(error)
    if isinstance(error, str):
        kind = data.get("error_type")
        return f"{kind}: {error}" if kind else error
    if data.get("object") == "error" or ("message" in data and "type" in data):
        return _nested(data)
    if "detail" in data:
        return str(data["detail"])
    return None


def error_message(body: bytes) -> str:
    """A short, single-line message from an error response body ('' when empty)."""
    text = body[:65536].decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    try:
        found = message_from_json(json.loads(text))
    except ValueError:
        found = None
    if found is None:
        found = _SPACE.sub(" ", _TAG.sub(" ", text)).strip()
    return _CONTROL.sub("", found)[:MAX_MESSAGE]
