"""The facts a host agent gathers for the pre-deploy checklist, as it sends them.

The host agent reads NVML, /proc/meminfo, df, ss and docker on a GPU host and sends the
answers as JSON. `PredeployFacts.from_dict` refuses anything malformed, naming every
missing, unknown or wrong-typed field: they come from a remote machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class GpuFact:
    index: int
    name: str
    memory_total_mib: int
    memory_used_mib: int | None
    process_count: int | None
    numa_node: int | None  # NVML/sysfs report -1 when the platform has no NUMA


@dataclass(frozen=True, kw_only=True)
class ModelFiles:
    config_json: bool
    tokenizer: bool  # tokenizer.json, tokenizer.model or tokenizer_config.json
    safetensors_count: int
    safetensors_bytes: int
    index_json_missing_shards: tuple[str, ...]  # named in model.safetensors.index.json, absent


@dataclass(frozen=True, kw_only=True)
class PredeployFacts:
    driver_version: str | None
    cuda_driver_version: str | None  # the CUDA the driver supports (nvmlSystemGetCudaDriverVersion)
    gpus: tuple[GpuFact, ...]
    mem_total_bytes: int | None
    mem_available_bytes: int | None
    swap_total_bytes: int | None
    model_dir: str
    model_dir_exists: bool | None
    model_dir_free_bytes: int | None  # on the filesystem that holds (or will hold) model_dir
    model_files: ModelFiles | None
    shm_total_bytes: int | None
    port: int  # the port the agent looked at
    port_listener: str | None  # e.g. "pid 2716 python3"; None: nothing listens
    docker_version: str | None
    cpu_numa_nodes: int | None

    def to_dict(self) -> dict[str, Any]:
        return _lists(asdict(self))

    @classmethod
    def from_dict(cls, data: object) -> PredeployFacts:
        """Facts from the agent's JSON; FactsError (a ValueError) naming every missing,
        unknown or wrong-typed field."""
        problems = _FACTS(data, "facts")
        if problems:
            raise FactsError(problems)
        assert isinstance(data, Mapping)
        values = dict(data)
        files = values.pop("model_files")
        if files is not None:
            shards = tuple(files["index_json_missing_shards"])
            files = ModelFiles(**{**files, "index_json_missing_shards": shards})
        gpus = tuple(GpuFact(**gpu) for gpu in values.pop("gpus"))
        return cls(gpus=gpus, model_files=files, **values)


class FactsError(ValueError):
    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        more = f"; and {len(problems) - 12} more" if len(problems) > 12 else ""
        super().__init__("host facts refused: " + "; ".join(problems[:12]) + more)


def _lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _lists(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(item) for item in value]
    return value


Check = Callable[[object, str], list[str]]


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _leaf(test: Callable[[object], str | None]) -> Check:
    def check(value: object, path: str) -> list[str]:
        problem = test(value)
        return [f"{path}: {problem}"] if problem else []

    return check


def _integer(*, lo: int = 0, hi: int = 1 << 62) -> Check:
    def test(value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected an integer, got {_kind(value)}"
        return None if lo <= value <= hi else f"{value} is outside {lo}..{hi}"

    return _leaf(test)


def _text(limit: int) -> Check:
    def test(value: object) -> str | None:
        if not isinstance(value, str):
            return f"expected a string, got {_kind(value)}"
        return None if len(value) <= limit else f"longer than {limit} characters"

    return _leaf(test)


_flag = _leaf(lambda value: None if isinstance(value, bool) else f"expected a boolean, got {_kind(value)}")


def _optional(check: Check) -> Check:
    return lambda value, path: [] if value is None else check(value, path)


def _list_of(check: Check, *, limit: int) -> Check:
    def checked(value: object, path: str) -> list[str]:
        if not isinstance(value, list | tuple):
            return [f"{path}: expected a list, got {_kind(value)}"]
        if len(value) > limit:
            return [f"{path}: more than {limit} entries"]
        return [problem for i, item in enumerate(value) for problem in check(item, f"{path}[{i}]")][:20]

    return checked


def _fields(spec: Mapping[str, Check]) -> Check:
    def checked(value: object, path: str) -> list[str]:
        if not isinstance(value, Mapping):
            return [f"{path}: expected an object, got {_kind(value)}"]
        problems = []
        missing = [name for name in spec if name not in value]
        unknown = sorted(str(name)[:40] for name in value if name not in spec)
        if missing:
            problems.append(f"{path}: missing field(s) {', '.join(missing)}")
        if unknown:
            problems.append(f"{path}: unknown field(s) {', '.join(unknown[:10])}")
        for name, check in spec.items():
            if name in value:
                problems += check(value[name], f"{path}.{name}")
        return problems

    return checked


_SIZE = _optional(_integer())
_GPU = _fields(
    {
        "index": _integer(hi=1023),
        "name": _text(256),
        "memory_total_mib": _integer(),
        "memory_used_mib": _SIZE,
        "process_count": _SIZE,
        "numa_node": _optional(_integer(lo=-1, hi=1023)),
    }
)
_MODEL_FILES = _fields(
    {
        "config_json": _flag,
        "tokenizer": _flag,
        "safetensors_count": _integer(),
        "safetensors_bytes": _integer(),
        "index_json_missing_shards": _list_of(_text(1024), limit=10_000),
    }
)
_FACTS = _fields(
    {
        "driver_version": _optional(_text(64)),
        "cuda_driver_version": _optional(_text(64)),
        "gpus": _list_of(_GPU, limit=64),
        "mem_total_bytes": _SIZE,
        "mem_available_bytes": _SIZE,
        "swap_total_bytes": _SIZE,
        "model_dir": _text(4096),
        "model_dir_exists": _optional(_flag),
        "model_dir_free_bytes": _SIZE,
        "model_files": _optional(_MODEL_FILES),
        "shm_total_bytes": _SIZE,
        "port": _integer(lo=1, hi=65535),
        "port_listener": _optional(_text(256)),
        "docker_version": _optional(_text(200)),
        "cpu_numa_nodes": _optional(_integer(hi=1024)),
    }
)
