"""The model catalogue: architecture facts of popular models, shipped as data
(data/models.json, each entry a config.json subset with its sources) and copied into the
database, where the admin edits them and uploaded configs join them.

Plain Python: `shipped()` reads the file, `CatalogEntry.architecture()` parses an entry,
`entry_from_upload()` turns a pasted config.json (and optional safetensors index) into an
entry with errors that name the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from core.i18n import later
from diagnostics.sizing import bounds
from diagnostics.sizing.architecture import (
    Architecture,
    ConfigError,
    from_hf_config,
    weight_bytes_from_index,
)

SHIPPED_FILE = Path(__file__).parent / "data" / "models.json"
MAX_CONFIG_BYTES = 1_000_000  # a config.json is a few KB; a safetensors index a few hundred


@dataclass(frozen=True, kw_only=True)
class CatalogEntry:
    key: str
    name: str
    config: dict[str, Any]
    hf_id: str = ""
    aliases: tuple[str, ...] = ()
    family: str = ""
    params_total: float | None = None
    params_active: float | None = None
    weight_bytes: int | None = None
    sources: tuple[str, ...] = field(default_factory=tuple)

    def architecture(self) -> Architecture:
        arch = from_hf_config(self.config, name=self.name, params_total=self.params_total)
        if self.weight_bytes:
            arch = arch.with_weights(self.weight_bytes)
        # A quantized config sizes its own weights (quantization.py); others need a count.
        if not arch.params_total and not arch.weight_bytes and not arch.weight_bytes_estimate:
            raise ConfigError(
                later(
                    "%(model)s: give the parameter count or a safetensors index for the weights",
                    model=self.name,
                )
            )
        return arch

    def names(self) -> set[str]:
        """Every name this model is known by, lower-cased, for matching a served model name."""
        short = self.hf_id.rsplit("/", 1)[-1]
        return {n.lower() for n in (self.key, self.name, self.hf_id, short, *self.aliases) if n}


@cache
def shipped() -> tuple[CatalogEntry, ...]:
    data = json.loads(SHIPPED_FILE.read_text(encoding="utf-8"))
    return tuple(
        CatalogEntry(
            key=m["key"],
            name=m["name"],
            hf_id=m.get("hf_id", ""),
            aliases=tuple(m.get("aliases", ())),
            family=m.get("family", ""),
            params_total=m.get("params_total"),
            params_active=m.get("params_active"),
            weight_bytes=m.get("weight_bytes"),
            config=m["config"],
            sources=tuple(m.get("sources", ())),
        )
        for m in data["models"]
    )


def find(name: str, entries: tuple[CatalogEntry, ...] | list[CatalogEntry]) -> CatalogEntry | None:
    """The entry a name (key, hf id, its last part, an alias, a local path ending in one of
    these) refers to, case-insensitively."""
    wanted = name.strip().rstrip("/").lower()
    candidates = [wanted, wanted.rsplit("/", 1)[-1]]
    for candidate in candidates:
        for entry in entries:
            if candidate in entry.names():
                return entry
    return None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")[:60] or "model"


def parse_json(text: str | bytes, *, what: str) -> Any:
    """JSON from a paste or an upload, with an error that says which file and where."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(
            later(
                "%(file)s is %(size)s bytes; a real one is far under %(limit)s",
                file=what,
                size=f"{len(text):,}",
                limit=f"{MAX_CONFIG_BYTES:,}",
            )
        )
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                later("%(file)s is not UTF-8 text (byte %(byte)s)", file=what, byte=exc.start)
            ) from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            later(
                "%(file)s is not valid JSON: %(error)s at line %(line)s, column %(column)s",
                file=what,
                error=exc.msg,
                line=exc.lineno,
                column=exc.colno,
            )
        ) from None
    except RecursionError:
        raise ConfigError(bounds.too_deep(what)) from None
    except ValueError as exc:  # a number of more than 4,300 digits
        raise ConfigError(
            later("%(file)s is not JSON the calculator can read: %(error)s", file=what, error=str(exc)[:200])
        ) from None
    bounds.check_tree(parsed, what=what)
    return parsed


def entry_from_upload(
    *,
    config_text: str | bytes,
    index_text: str | bytes | None = None,
    name: str = "",
    params_total: float | None = None,
) -> CatalogEntry:
    """A catalogue entry from a Hugging Face config.json and, optionally, its
    model.safetensors.index.json; ConfigError naming the field at fault."""
    config = parse_json(config_text, what="config.json")
    if not isinstance(config, dict):
        raise ConfigError(later("config.json must be a JSON object"))
    weight_bytes = None
    if index_text:
        weight_bytes = weight_bytes_from_index(parse_json(index_text, what="model.safetensors.index.json"))
    display = name.strip() or str(config.get("_name_or_path") or "").strip()
    if not display:
        architectures = config.get("architectures") or ["uploaded model"]
        display = (
            str(architectures[0]) if isinstance(architectures, list) and architectures else "uploaded model"
        )
    entry = CatalogEntry(
        key=slug(display),
        name=display,
        hf_id=str(config.get("_name_or_path") or ""),
        config=config,
        params_total=params_total,
        weight_bytes=weight_bytes,
        sources=("uploaded config.json",),
    )
    entry.architecture()  # refuse what the calculator cannot use, now rather than later
    return entry
