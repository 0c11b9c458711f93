"""The JSON vLLM's OpenAI-compatible server answers with: model lists, completions, chunks.

Pure functions from what happened (ids, tokens, finish reason) to dicts; the server turns
them into responses and SSE events (`data: {...}\\n\\n`, then `data: [DONE]\\n\\n`).
"""

from __future__ import annotations

from typing import Any


def model_list(*, served_model_name: str, max_model_len: int, created: int) -> dict[str, Any]:
    card = {
        "id": served_model_name,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": served_model_name,
        "parent": None,
        "max_model_len": max_model_len,
        "permission": [
            {
                "id": f"modelperm-{created:x}",
                "object": "model_permission",
                "created": created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
    return {"object": "list", "data": [card]}


def usage(*, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def chat_completion(
    *,
    id_: str,
    created: int,
    model: str,
    content: str,
    reasoning: str | None,
    finish_reason: str,
    usage_: dict,
) -> dict[str, Any]:
    message = {"role": "assistant", "content": content, "reasoning_content": reasoning, "tool_calls": []}
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
    }
    return {
        "id": id_,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage_,
        "prompt_logprobs": None,
    }


def chat_chunk(
    *, id_: str, created: int, model: str, delta: dict[str, Any], finish_reason: str | None = None
) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    if finish_reason is not None:
        choice["stop_reason"] = None
    return {
        "id": id_,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [choice],
    }


def completion(
    *, id_: str, created: int, model: str, text: str, finish_reason: str, usage_: dict
) -> dict[str, Any]:
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
        "prompt_logprobs": None,
    }
    return {
        "id": id_,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage_,
    }


def completion_chunk(
    *, id_: str, created: int, model: str, text: str, finish_reason: str | None = None
) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
    return {"id": id_, "object": "text_completion", "created": created, "model": model, "choices": [choice]}


def usage_chunk(*, id_: str, created: int, model: str, object_: str, usage_: dict) -> dict[str, Any]:
    """The last chunk when stream_options.include_usage is set: no choices, the usage."""
    return {"id": id_, "object": object_, "created": created, "model": model, "choices": [], "usage": usage_}
