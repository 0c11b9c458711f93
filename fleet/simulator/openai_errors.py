"""vLLM's OpenAI-format error bodies and messages, by version (vLLM reference §2.2).

Up to 0.10.0 the body is flat: {"object": "error", "message", "type", "param", "code"};
from 0.10.1 it is nested: {"error": {"message", "type", "param", "code"}}.
"""

from __future__ import annotations

from typing import Any

from fleet.simulator import vllm_versions


class RequestRejected(Exception):
    """A request vLLM refuses before it reaches the engine."""

    def __init__(
        self, message: str, *, status: int = 400, err_type: str = "BadRequestError", param: str | None = None
    ):
        super().__init__(message)
        self.message, self.status, self.err_type, self.param = message, status, err_type, param


def error_body(
    *, version: str, message: str, err_type: str, status: int, param: str | None = None
) -> dict[str, Any]:
    info = {"message": message, "type": err_type, "param": param, "code": status}
    if vllm_versions.nested_error_bodies(version):
        return {"error": info}
    return {"object": "error", **info}


def context_length_error(
    *, version: str, max_model_len: int, prompt_tokens: int, max_tokens: int | None
) -> RequestRejected | None:
    """The rejection for a prompt (plus max_tokens) over max_model_len, or None if it fits."""
    if max_tokens is None:
        if prompt_tokens < max_model_len:
            return None
    elif prompt_tokens + max_tokens <= max_model_len and prompt_tokens < max_model_len:
        return None
    if vllm_versions.validation_messages_are_new(version):
        return _new_style(max_model_len, prompt_tokens, max_tokens)
    return _old_style(max_model_len, prompt_tokens, max_tokens)


def _old_style(limit: int, prompt: int, max_tokens: int | None) -> RequestRejected:
    head = f"This model's maximum context length is {limit} tokens. However, you requested"
    if max_tokens is None:
        return RequestRejected(
            f"{head} {prompt} tokens in the messages, Please reduce the length of the messages."
        )
    return RequestRejected(
        f"{head} {prompt + max_tokens} tokens ({prompt} in the messages, {max_tokens} in the completion). "
        "Please reduce the length of the messages or completion."
    )


def _new_style(limit: int, prompt: int, max_tokens: int | None) -> RequestRejected:
    if max_tokens is None or prompt >= limit:
        return RequestRejected(
            f"This model's maximum context length is {limit} tokens. However, your request has {prompt} "
            "input tokens. Please reduce the length of the input messages.",
            param="input_tokens",
        )
    return RequestRejected(
        f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum context "
        f"length is {limit} tokens and your request has {prompt} input tokens "
        f"({max_tokens} > {limit} - {prompt}).",
        param="max_tokens",
    )


def model_not_found(model: str) -> RequestRejected:
    return RequestRejected(
        f"The model `{model}` does not exist.", status=404, err_type="NotFoundError", param="model"
    )


def field_missing(field_name: str, body: Any) -> RequestRejected:
    """FastAPI's RequestValidationError, as vLLM's handler words it (type = the status phrase)."""
    detail = [{"type": "missing", "loc": ("body", field_name), "msg": "Field required", "input": body}]
    return RequestRejected(str(detail), err_type="Bad Request")


def bad_value(field_name: str, message: str) -> RequestRejected:
    return RequestRejected(f"{field_name}: {message}", param=field_name)
