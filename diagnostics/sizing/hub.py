"""A model's sizing facts fetched from the Hugging Face Hub, or a mirror of it, by its id.

`fetch("Qwen/Qwen3-8B")` reads the repository's config.json and, for the exact weight bytes,
model.safetensors.index.json (metadata.total_size) or, for a single-file model, the size
of model.safetensors from the hub's file metadata (the X-Linked-Size header of a HEAD; the
file's few-KB JSON header is counted with the tensors). A quantization_config in config.json
is kept with the config, so the calculator sees the checkpoint's quantization.

The requests use huggingface_hub's URL layout (hf_hub_url), headers (build_hf_headers), HTTP
client (get_session) and error mapping (hf_raise_for_status). hf_hub_download is not used: with
no cached copy it retries a failed metadata request with a 60 s timeout and a failed download
five times, and a sizing request must not wait that long. Here one deadline bounds the whole
fetch, no request is retried, and each failure is a HubError of its own kind, in words an
engineer can act on (set HF_TOKEN, check the id, upload config.json when the hub is out of
reach).

Plain Python: the endpoint, the token and the timeout are arguments; the console passes its
settings (HF_ENDPOINT, HF_TOKEN, HUB_FETCH_TIMEOUT_S).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx2  # huggingface_hub's HTTP client since 2.0: its errors are the transport's
from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status, validate_repo_id

from core.i18n import Message, later
from diagnostics.sizing import bounds
from diagnostics.sizing.architecture import ConfigError, from_hf_config, weight_bytes_from_index
from diagnostics.sizing.catalog import MAX_CONFIG_BYTES, CatalogEntry, parse_json, slug

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
DEFAULT_TIMEOUT_S = 10.0
_OWNER_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


class Problem(StrEnum):
    INVALID_ID = "invalid_id"  # refused before any request
    NOT_FOUND = "not_found"  # no such repository, revision or config.json
    NEEDS_TOKEN = "needs_token"  # gated or private, and no token was sent
    NO_ACCESS = "no_access"  # the token sent does not open it
    UNREACHABLE = "unreachable"  # no connection: offline, refused, blocked
    TIMEOUT = "timeout"  # the hub did not answer in time
    HUB_ERROR = "hub_error"  # the hub answered with an error of its own (5xx, 429)
    NOT_A_CONFIG = "not_a_config"  # what came back is no config the calculator can use
    NO_WEIGHTS = "no_weights"  # no safetensors to size the weights by


# The hub cannot say what the model is: sizing it from an uploaded config.json still can.
UPLOAD_INSTEAD = frozenset({Problem.UNREACHABLE, Problem.TIMEOUT, Problem.HUB_ERROR, Problem.NO_WEIGHTS})


class HubError(ValueError):
    """A model the hub did not give; `problem` says why, `message` (core.i18n) in words to show.
    str() is English."""

    def __init__(self, problem: Problem, message: Message) -> None:
        super().__init__(message)
        self.problem = problem

    @property
    def message(self) -> Message:
        return self.args[0]

    @property
    def offers_upload(self) -> bool:
        """Whether uploading the model's config.json is the way on (the hub is out of reach)."""
        return self.problem in UPLOAD_INSTEAD


def looks_like_id(text: str) -> bool:
    """Whether a name could be a Hub model id, owner/name (a served model name often is)."""
    if not _OWNER_NAME.fullmatch(text):
        return False
    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def parse_id(text: str) -> str:
    """The model id typed, checked before any request is made."""
    hf_id = text.strip()
    if not looks_like_id(hf_id):
        raise HubError(
            Problem.INVALID_ID,
            later(
                "%(id)s is not a Hugging Face model id: give it as owner/name, like %(example)s",
                id=repr(hf_id),
                example="Qwen/Qwen3-8B",
            ),
        )
    return hf_id


def fetch(
    hf_id: str,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    params_total: float | None = None,
) -> CatalogEntry:
    """The catalogue entry of a Hub model: its config.json and weight bytes, `sources` the URLs
    read (at the commit the hub served). `endpoint`: the hub or a mirror (default
    huggingface_hub's, from HF_ENDPOINT); `token`: sent as a bearer token, none when None;
    `timeout`: seconds for the whole fetch. `params_total` sizes a model without safetensors.
    HubError says what went wrong."""
    hub = _Hub(
        hf_id=parse_id(hf_id),
        revision=revision,
        endpoint=(endpoint or constants.ENDPOINT).rstrip("/"),
        token=token or None,
        timeout=timeout,
        deadline=time.monotonic() + timeout,
    )
    config_text, config_url = hub.read(CONFIG)
    config = _config(hub, config_text)  # a config the calculator cannot read ends the fetch here
    index = hub.read(INDEX, optional=True)
    weight_bytes, sources = None, [config_url]
    if index:
        weight_bytes = hub.valid(INDEX, lambda: weight_bytes_from_index(parse_json(index[0], what=INDEX)))
        sources.append(index[1])
    elif params_total is None:
        weight_bytes = hub.size(SINGLE_FILE)
    entry = CatalogEntry(
        key=slug(hub.hf_id),
        name=hub.hf_id,
        hf_id=hub.hf_id,
        config=config,
        params_total=params_total,
        weight_bytes=weight_bytes,
        sources=tuple(sources),
    )
    try:
        entry.architecture()
    except ConfigError:
        if weight_bytes is None and params_total is None:  # the config itself was read above
            raise HubError(
                Problem.NO_WEIGHTS,
                later(
                    "%(id)s has neither %(index)s nor %(single)s, so its weight size is unknown: give its "
                    "parameter count with its config.json",
                    id=hub.hf_id,
                    index=INDEX,
                    single=SINGLE_FILE,
                ),
            ) from None
        hub.valid(CONFIG, entry.architecture)  # the calculator's refusal, naming the field
    return entry


def _config(hub: _Hub, text: bytes) -> dict[str, Any]:
    """The parsed config.json, its fields checked as the calculator reads them."""

    def parsed() -> dict[str, Any]:
        config = parse_json(text, what=CONFIG)
        from_hf_config(config, name=hub.hf_id)
        return config

    return hub.valid(CONFIG, parsed)


@dataclass(kw_only=True)
class _Hub:
    """One fetch's requests: the same repository, revision, endpoint, token and deadline."""

    hf_id: str
    revision: str
    endpoint: str
    token: str | None
    timeout: float
    deadline: float
    commit: str | None = None  # the commit the hub served config.json from

    def url(self, filename: str) -> str:
        """The file's URL at the commit config.json came from, once the hub has named it, so
        every file of one fetch is of the same commit (a push between requests changes none)."""
        return hf_hub_url(self.hf_id, filename, revision=self.commit or self.revision, endpoint=self.endpoint)

    def read(self, filename: str, *, optional: bool = False) -> Any:
        """(body, URL) of a small file; None for a missing optional one. The body stops one
        byte past the catalogue's limit, so an oversized answer is refused, not read whole."""
        with self._requesting(filename):
            headers = build_hf_headers(token=self.token or False, library_name="llm-ops-console")
            with get_session().stream(
                "GET", self.url(filename), headers=headers, timeout=self._left(), follow_redirects=True
            ) as response:
                if optional and response.status_code == 404:
                    return None
                hf_raise_for_status(response)
                self.commit = self.commit or response.headers.get(constants.HUGGINGFACE_HEADER_X_REPO_COMMIT)
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_CONFIG_BYTES:
                        break
                    self._left()
        return bytes(body), self.url(filename)

    def size(self, filename: str) -> int | None:
        """A file's size from the hub's metadata (a HEAD, no download); None when it has none."""
        with self._requesting(filename):
            try:
                metadata = get_hf_file_metadata(
                    self.url(filename),
                    token=self.token or False,
                    timeout=self._left(),
                    endpoint=self.endpoint,
                    library_name="llm-ops-console",
                )
            except HfHubHTTPError as exc:
                if exc.response is not None and exc.response.status_code == 404:
                    return None
                raise
        if metadata.size is not None and not bounds.in_range(metadata.size, 0, bounds.MAX_WEIGHT_BYTES):
            raise HubError(
                Problem.NOT_A_CONFIG,
                later(
                    "%(url)s has a size of %(size)s bytes, which no model has",
                    url=self.url(filename),
                    size=bounds.shown(metadata.size),
                ),
            )
        return metadata.size

    def valid(self, filename: str, check: Any) -> Any:
        """`check()`, a ConfigError becoming the hub's answer that is no usable config."""
        try:
            return check()
        except ConfigError as exc:
            raise HubError(
                Problem.NOT_A_CONFIG,
                later(
                    "%(url)s is not a config the calculator can use: %(problem)s",
                    url=self.url(filename),
                    problem=exc.args[0],
                ),
            ) from None

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise httpx2.TimeoutException("the fetch's deadline passed")
        return left

    @contextmanager
    def _requesting(self, filename: str) -> Iterator[None]:
        try:
            yield
        except HfHubHTTPError as exc:
            raise HubError(*self._refused(exc, filename)) from None
        except httpx2.TimeoutException:
            raise HubError(
                Problem.TIMEOUT,
                later(
                    "%(endpoint)s did not answer within %(seconds)s s: the console cannot reach the hub. "
                    "Upload the model's config.json instead, or set HF_ENDPOINT to a mirror it can reach.",
                    endpoint=self.endpoint,
                    seconds=f"{self.timeout:g}",
                ),
            ) from None
        except (httpx2.TransportError, OfflineModeIsEnabled) as exc:
            raise HubError(
                Problem.UNREACHABLE,
                later(
                    "Cannot reach %(endpoint)s (%(reason)s): the console is offline or the hub is blocked. "
                    "Upload the model's config.json instead, or set HF_ENDPOINT to a mirror it can reach.",
                    endpoint=self.endpoint,
                    reason=str(exc) or type(exc).__name__,
                ),
            ) from None

    def _refused(self, exc: HfHubHTTPError, filename: str) -> tuple[Problem, Message]:
        """What an HTTP error from the hub means for this fetch."""
        status = exc.response.status_code if exc.response is not None else 0
        page = f"{self.endpoint}/{self.hf_id}"
        if isinstance(exc, GatedRepoError) or status in (401, 403):
            return self._locked(exc, status, page)
        if isinstance(exc, RevisionNotFoundError):
            return Problem.NOT_FOUND, later(
                "%(id)s has no revision %(revision)s", id=self.hf_id, revision=repr(self.revision)
            )
        if isinstance(exc, RemoteEntryNotFoundError) and filename == CONFIG:
            return Problem.NOT_FOUND, later(
                "%(id)s has no config.json: it is not a Transformers model the calculator can size "
                "(a GGUF-only repository has none)",
                id=self.hf_id,
            )
        if status == 404:
            return Problem.NOT_FOUND, later(
                "%(endpoint)s has no model %(id)s (HTTP 404): check the id",
                endpoint=self.endpoint,
                id=self.hf_id,
            )
        return Problem.HUB_ERROR, later(
            "%(endpoint)s answered HTTP %(status)s for %(file)s of %(id)s; try again later, or upload the "
            "model's config.json instead",
            endpoint=self.endpoint,
            status=status,
            file=filename,
            id=self.hf_id,
        )

    def _locked(self, exc: HfHubHTTPError, status: int, page: str) -> tuple[Problem, Message]:
        gated = isinstance(exc, GatedRepoError)
        if self.token is None:
            if gated:
                return Problem.NEEDS_TOKEN, later(
                    "%(id)s is gated: accept its licence at %(page)s, then set HF_TOKEN to a token of that "
                    "account (HTTP %(status)s without a token)",
                    id=self.hf_id,
                    page=page,
                    status=status,
                )
            return Problem.NEEDS_TOKEN, later(
                "%(id)s is private or does not exist (HTTP %(status)s without a token): check the id, or "
                "set HF_TOKEN to a token that can read it",
                id=self.hf_id,
                status=status,
            )
        if gated:
            return Problem.NO_ACCESS, later(
                "%(id)s is gated and the token in HF_TOKEN has no access (HTTP %(status)s): accept its "
                "licence at %(page)s with the account the token belongs to",
                id=self.hf_id,
                page=page,
                status=status,
            )
        return Problem.NO_ACCESS, later(
            "The hub refused the token in HF_TOKEN for %(id)s (HTTP %(status)s): check that it is valid "
            "and can read the repository",
            id=self.hf_id,
            status=status,
        )
