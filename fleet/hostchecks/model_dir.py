"""What the sizing calculator needs from a model directory on a host, read by the host's agent:
config.json, model.safetensors.index.json and hf_quant_config.json when present, and the count
and total size of the *.safetensors files (their names and sizes only, never their contents).

The directory is an absolute path as the host spells it, read under the agent's root (`/` on a
host, `/host` in the compose file's agent container, a fixture tree in tests). Symlinks are
followed as the host follows them: a Hugging Face cache snapshot
(`models--ORG--NAME/snapshots/REVISION/`) is a directory of relative links into `../../blobs/`,
and an absolute link target is taken from the root, as in a chroot. A `..` that would climb
above the root is refused, so nothing outside the root is ever read.

What the agent sends back must fit one report (512 KiB, fleet/agent/reports.py): an index too
big for that is sent as its metadata.total_size alone, the only part sizing reads.

Plain Python: `read_model_dir` raises ModelDirError, whose `message` (core.i18n) says what is
wrong in words an engineer can act on."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections import deque
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path, PurePosixPath
from typing import Any

from core.i18n import Message, later

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
# ModelOpt checkpoints (before ModelOpt 0.31) keep their quantization in this file.
QUANT_CONFIG = "hf_quant_config.json"
MAX_CONFIG_BYTES = 1_000_000
MAX_INDEX_BYTES = 4 * 1024 * 1024
MAX_QUANT_CONFIG_BYTES = 256 * 1024
INDEX_HEAD_BYTES = 64 * 1024  # where a bigger index's metadata is looked for
MAX_ENTRIES = 10_000  # directory entries looked at for *.safetensors
MAX_WEIGHT_BYTES = 1 << 50  # 1 PiB of shards, the sizing calculator's bound too
MAX_SYMLINKS = 40  # as Linux's path walk (ELOOP)
# Room for the texts in one answer: the report's 512 KiB less its envelope, counted as the
# console counts a report (json.dumps, non-ASCII escaped).
ANSWER_CHARS = 480 * 1024
_METADATA_FIRST = re.compile(r'\s*\{\s*"metadata"\s*:\s*')


class ModelDirError(Exception):
    """The directory could not be read for sizing; `message` says why. str() is English."""

    def __init__(self, message: Message) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, kw_only=True)
class ModelDirFiles:
    """The texts and figures of one model directory, as the agent sends them."""

    model_dir: str
    config_text: str
    index_text: str | None = None  # the whole index, or {"metadata": {"total_size": N}} when cut
    index_cut: bool = False  # only the index's metadata.total_size was kept
    quant_config_text: str | None = None
    safetensors_count: int = 0
    safetensors_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> ModelDirFiles:
        """The agent's answer, checked field by field (it comes from another machine);
        ValueError naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("the answer must be an object")
        unknown = sorted(str(name)[:40] for name in data if name not in _FIELDS)
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown[:10])}")
        for name, (kind, required) in _FIELDS.items():
            value = data.get(name)
            if value is None:
                if required:
                    raise ValueError(f"missing field {name}")
                continue
            if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind):
                raise ValueError(f"{name}: expected {kind.__name__}, got {type(value).__name__}")
            if kind is int and value < 0:
                raise ValueError(f"{name}: {value} is below zero")
            limit = _LIMITS.get(name)
            if limit is not None and (len(value) if isinstance(value, str) else value) > limit:
                raise ValueError(f"{name}: more than {limit:,}")
        return cls(**{name: value for name, value in data.items() if value is not None})


_FIELDS: dict[str, tuple[type, bool]] = {
    "model_dir": (str, True),
    "config_text": (str, True),
    "index_text": (str, False),
    "index_cut": (bool, False),
    "quant_config_text": (str, False),
    "safetensors_count": (int, False),
    "safetensors_bytes": (int, False),
}
# What an honest agent sends at most: characters of a text, or a number.
_LIMITS: dict[str, int] = {
    "model_dir": 4096,
    "config_text": MAX_CONFIG_BYTES,
    "index_text": MAX_INDEX_BYTES,
    "quant_config_text": MAX_QUANT_CONFIG_BYTES,
    "safetensors_count": MAX_ENTRIES,
    "safetensors_bytes": MAX_WEIGHT_BYTES,
}


def read_model_dir(model_dir: str, *, root: Path, answer_chars: int = ANSWER_CHARS) -> ModelDirFiles:
    """The sizing files of `model_dir` (absolute, as the host spells it) under `root`, cut to
    fit `answer_chars`; ModelDirError saying what is wrong."""
    if not isinstance(model_dir, str) or not model_dir.startswith("/") or "\0" in model_dir:
        raise ModelDirError(
            later("%(path)s is not an absolute path: give it like /models/Qwen3-8B", path=repr(model_dir))
        )
    folder = _Folder(root=Path(os.path.realpath(root)), shown=model_dir.rstrip("/") or "/")
    folder.real = folder.directory()
    config = folder.text(CONFIG, MAX_CONFIG_BYTES)
    if config is None:
        raise ModelDirError(
            later(
                "%(dir)s has no config.json: is this the model's snapshot directory? A Hugging Face cache "
                "keeps it under snapshots/<revision>/ (models--ORG--NAME/snapshots/<revision>/)",
                dir=folder.shown,
            )
        )
    index, cut = folder.index()
    files = ModelDirFiles(
        model_dir=model_dir,
        config_text=config,
        index_text=index,
        index_cut=cut,
        quant_config_text=folder.text(QUANT_CONFIG, MAX_QUANT_CONFIG_BYTES),
        **folder.safetensors(),
    )
    return _fitted(files, answer_chars=answer_chars)


def resolve_in_root(root: Path, path: str) -> Path:
    """The real path under `root` of `path` (absolute, as the host spells it), its symlinks
    followed as the host follows them: an absolute target from the root, a relative one from
    the link's directory. ModelDirError when a `..` climbs above the root; FileNotFoundError
    when a part is missing; OSError(ELOOP) past MAX_SYMLINKS links."""
    todo = deque(PurePosixPath(path).parts[1:])
    done: list[str] = []
    links = 0
    while todo:
        part = todo.popleft()
        if part == "..":
            if not done:
                raise ModelDirError(
                    later("%(path)s leads outside the agent's root: a link or .. climbs above it", path=path)
                )
            done.pop()
            continue
        candidate = root.joinpath(*done, part)
        if not stat.S_ISLNK(os.lstat(candidate).st_mode):
            done.append(part)
            continue
        links += 1
        if links > MAX_SYMLINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(candidate))
        target = PurePosixPath(os.readlink(candidate))
        if target.is_absolute():
            done, target = [], target.relative_to("/")
        todo.extendleft(reversed(target.parts))
    return root.joinpath(*done)


@dataclass
class _Folder:
    """One model directory under the agent's root: `shown` as the host spells it, `real` the
    path it resolved to under the root."""

    root: Path
    shown: str
    real: Path | None = None

    def directory(self) -> Path:
        try:
            real = resolve_in_root(self.root, self.shown)
            if stat.S_ISDIR(os.stat(real).st_mode):
                return real
        except OSError as exc:
            raise ModelDirError(_unreadable(self.shown, exc)) from None
        raise ModelDirError(later("%(path)s is not a directory", path=self.shown))

    def host_path(self, name: str) -> str:
        return f"{self.shown.rstrip('/')}/{name}"

    def text(self, name: str, limit: int) -> str | None:
        """A small file of the directory as text; None when it is missing."""
        read = self.read(name, limit)
        if read is None:
            return None
        data, size = read
        if size > limit:
            raise ModelDirError(self.too_big(name, size, limit))
        return self.decoded(name, data)

    def index(self) -> tuple[str | None, bool]:
        """The safetensors index as text, or, past MAX_INDEX_BYTES, its metadata.total_size
        alone when the file begins with it, as huggingface_hub writes it ({"metadata": ...,
        "weight_map": ...}: save_torch_state_dict in
        https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/serialization/_torch.py).
        The flag: only the total was kept."""
        read = self.read(INDEX, MAX_INDEX_BYTES)
        if read is None:
            return None, False
        data, size = read
        if size <= MAX_INDEX_BYTES:
            return self.decoded(INDEX, data), False
        metadata = _leading_metadata(data[:INDEX_HEAD_BYTES])
        if metadata is None:
            raise ModelDirError(self.too_big(INDEX, size, MAX_INDEX_BYTES))
        return _total_only(metadata), True

    def read(self, name: str, limit: int) -> tuple[bytes, int] | None:
        """(at most limit + 1 bytes, the file's size); None when the file is missing."""
        shown = self.host_path(name)
        try:
            path = resolve_in_root(self.root, _spelled(self.root, self.real / name))
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ModelDirError(_unreadable(shown, exc)) from None
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ModelDirError(later("%(path)s is not a regular file", path=shown))
            data = f.read(limit + 1)
        return data, max(info.st_size, len(data))

    def decoded(self, name: str, data: bytes) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelDirError(
                later("%(path)s is not UTF-8 text (byte %(byte)s)", path=self.host_path(name), byte=exc.start)
            ) from None

    def too_big(self, name: str, size: int, limit: int) -> Message:
        return later(
            "%(path)s is %(size)s bytes; a real one is far under %(limit)s",
            path=self.host_path(name),
            size=f"{size:,}",
            limit=f"{limit:,}",
        )

    def safetensors(self) -> dict[str, int]:
        """How many *.safetensors files the directory holds and their bytes, links followed; a
        dangling link (an unfinished download in a Hugging Face cache) is not counted."""
        count = total = 0
        try:
            with os.scandir(self.real) as entries:
                names = sorted(entry.name for entry in islice(entries, MAX_ENTRIES))
        except OSError as exc:
            raise ModelDirError(_unreadable(self.shown, exc)) from None
        for name in names:
            if not name.endswith(".safetensors"):
                continue
            try:
                info = os.stat(resolve_in_root(self.root, _spelled(self.root, self.real / name)))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ModelDirError(_unreadable(self.host_path(name), exc)) from None
            if stat.S_ISREG(info.st_mode):
                count, total = count + 1, total + info.st_size
        return {"safetensors_count": count, "safetensors_bytes": total}


def _fitted(files: ModelDirFiles, *, answer_chars: int) -> ModelDirFiles:
    """The files as they fit one answer: a too big index cut to its metadata.total_size."""
    if _chars(files) <= answer_chars:
        return files
    if files.index_text is not None and not files.index_cut:
        try:
            index = json.loads(files.index_text)
        except (ValueError, RecursionError) as exc:
            raise ModelDirError(
                later(
                    "%(path)s is not valid JSON: %(error)s", path=f"{files.model_dir}/{INDEX}", error=str(exc)
                )
            ) from None
        metadata = index.get("metadata") if isinstance(index, dict) else None
        files = ModelDirFiles(**{**files.to_dict(), "index_text": _total_only(metadata), "index_cut": True})
    if _chars(files) <= answer_chars:
        return files
    raise ModelDirError(
        later(
            "%(dir)s: config.json and hf_quant_config.json together are %(size)s characters, more than one "
            "answer of the agent carries (%(limit)s)",
            dir=files.model_dir,
            size=f"{_chars(files):,}",
            limit=f"{answer_chars:,}",
        )
    )


def _leading_metadata(head: bytes) -> Any:
    """The "metadata" value an index begins with; None when it begins otherwise."""
    text = head.decode("utf-8", errors="ignore")
    found = _METADATA_FIRST.match(text)
    if not found:
        return None
    try:
        return json.JSONDecoder().raw_decode(text, found.end())[0]
    except (ValueError, RecursionError):
        return None


def _total_only(metadata: Any) -> str:
    """An index reduced to what sizing reads of it; a metadata that is no object, or a total that
    is no number, stays as it is for the console's parser to name (a list or an object as its
    type's name: nothing nested travels)."""
    if isinstance(metadata, dict):
        metadata = {"total_size": _scalar(metadata.get("total_size"))}
    else:
        metadata = _scalar(metadata)
    return json.dumps({"metadata": metadata} if metadata is not None else {})


def _scalar(value: Any) -> Any:
    return type(value).__name__ if isinstance(value, list | dict) else value


def _chars(files: ModelDirFiles) -> int:
    return len(json.dumps(files.to_dict()))


def _spelled(root: Path, path: Path) -> str:
    """How the host spells a real path under root: root/models/x is /models/x."""
    return "/" + path.relative_to(root).as_posix().lstrip("/")


def _unreadable(path: str, exc: OSError) -> Message:
    if exc.errno == errno.ENOENT:
        return later("%(path)s does not exist on the host", path=path)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return later("%(path)s could not be read: permission denied for the agent's user", path=path)
    if exc.errno == errno.ENOTDIR:
        return later("%(path)s is not a directory", path=path)
    if exc.errno == errno.ELOOP:
        return later("%(path)s could not be read: too many levels of symbolic links", path=path)
    return later(
        "%(path)s could not be read: %(reason)s", path=path, reason=exc.strerror or type(exc).__name__
    )
