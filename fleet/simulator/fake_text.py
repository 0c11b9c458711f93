"""Token counts for prompts and the words a simulated model "generates".

The simulator has no tokenizer: a token is about four characters of English, which is
close enough for context-length checks and usage numbers. Output tokens are words from a
small vocabulary, picked deterministically from the request id and the token's position.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

_WORDS = (
    "the", "fleet", "is", "healthy", "and", "every", "engine", "answers", "within", "its",
    "budget", "while", "queues", "stay", "short", "tokens", "flow", "steadily", "through", "batch",
    "cache", "blocks", "remain", "free", "for", "new", "requests", "so", "latency", "holds",
)  # fmt: skip
CHAT_TOKENS_PER_MESSAGE = 4  # role markers of a chat template
CHAT_TOKENS_PER_PROMPT = 3  # the assistant turn's opening


def count_text_tokens(text: str) -> int:
    return max(1, -(-len(text) // 4))


def count_chat_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    total = CHAT_TOKENS_PER_PROMPT
    for message in messages:
        total += CHAT_TOKENS_PER_MESSAGE + count_text_tokens(_content_text(message.get("content")))
    return total


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def token_text(*, request_id: int, position: int) -> str:
    word = _WORDS[(request_id * 7919 + position * 104729) % len(_WORDS)]
    return word if position == 0 else " " + word


def tokens_text(*, request_id: int, start: int, end: int) -> str:
    return "".join(token_text(request_id=request_id, position=i) for i in range(start, end))


def reasoning_split(target_tokens: int) -> int:
    """How many of a reasoning model's tokens are reasoning before the visible answer."""
    return max(1, target_tokens * 2 // 5) if target_tokens > 1 else 0


def natural_length(*, rng: random.Random) -> int:
    """How long the model's answer "wants" to be: 24-203 tokens. A request whose max_tokens
    is smaller ends with "length", one with room for it ends with "stop"."""
    return 24 + rng.randrange(180)
