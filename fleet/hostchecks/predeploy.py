"""The guide's pre-deploy checklist (4.1.1), as judgements on facts a host agent gathered.

`run_checklist` judges the facts a host agent sent (`predeploy_facts.PredeployFacts`) against
what one instance will need (`PredeployRequirements`): each item passes, fails, warns, or is
unknown because its fact is missing, and says why with the numbers.

Fixed against the guide's script (corrections #14, docs/guide-corrections.md): the driver
minimum follows the engine release (`engine_builds`); the CUDA that matters is what the
driver supports (NVML), not nvcc's toolkit; the RAM rule is 1.5 x weights + 8 GiB; /dev/shm
is judged by NCCL's needs.
Sources with addresses: docs/host-agent.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.i18n import Message, later
from fleet.hostchecks.engine_builds import ENGINES, EngineBuild, Version, engine_build
from fleet.hostchecks.predeploy_facts import GpuFact, PredeployFacts
from fleet.probes.evidence import joined

Status = Literal["pass", "fail", "warn", "unknown"]
Overall = Literal["ready", "ready with warnings", "not ready", "incomplete"]
GIB, MIB = 1 << 30, 1 << 20
BUSY_USED_MIB = 500  # an idle GPU holds a few MiB; one CUDA context alone takes ~300-500 MiB
SHM_NEEDED_BYTES = GIB  # NCCL's troubleshooting guide: run containers with --shm-size=1g
RAM_FACTOR, RAM_HEADROOM_BYTES = 1.5, 8 * GIB  # the rule; guide 2.4.2: "x 1.5 + OS"
INFORMATIONAL = frozenset({"docker"})  # shown, but its absence leaves the host complete


@dataclass(frozen=True, kw_only=True)
class PredeployRequirements:
    engine: str  # one of ENGINES
    engine_version: str
    weights_bytes: int | None  # the model's weights (from the sizing module)
    gpu_indexes: tuple[int, ...]  # the GPUs the instance will use; empty: all of them
    tensor_parallel_size: int
    gpu_memory_utilization: float
    port: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_indexes", tuple(self.gpu_indexes))
        problems = [
            text
            for bad, text in (
                (self.engine not in ENGINES, f"engine {self.engine!r} is not one of {', '.join(ENGINES)}"),
                (self.tensor_parallel_size < 1, "tensor_parallel_size must be at least 1"),
                (not 0 < self.gpu_memory_utilization <= 1, "gpu_memory_utilization must be in (0, 1]"),
                (not 1 <= self.port <= 65535, f"port {self.port} is not a TCP port"),
                (self.weights_bytes is not None and self.weights_bytes < 0, "weights_bytes is negative"),
                (len(set(self.gpu_indexes)) < len(self.gpu_indexes), "gpu_indexes repeats a GPU"),
                (any(i < 0 for i in self.gpu_indexes), "gpu_indexes has a negative index"),
            )
            if bad
        ]
        if problems:
            raise ValueError("pre-deploy requirements: " + "; ".join(problems))


# ---- the judgements ----


@dataclass(frozen=True, kw_only=True)
class ChecklistItem:
    key: str
    title: Message
    status: Status
    evidence: Message

    def to_dict(self) -> dict[str, Any]:
        title, evidence = self.title.to_json(), self.evidence.to_json()
        return {"key": self.key, "status": self.status, "title": title, "evidence": evidence}


@dataclass(frozen=True)
class _Host:
    facts: PredeployFacts
    req: PredeployRequirements
    build: EngineBuild
    version_known: bool
    gpus: tuple[GpuFact, ...]  # the instance's GPUs that the host has
    absent: tuple[int, ...]  # the instance's GPU indexes the host lacks


Verdict = tuple[Status, Message]


def _gib(n: float) -> str:
    value = n / GIB
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def _size(n: int) -> str:
    return f"{_gib(n)} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def _joined(parts: Iterable[Message]) -> Message:
    message = joined(parts)
    assert message is not None
    return message


def _indexes(gpus: Sequence[GpuFact]) -> str:
    return ", ".join(str(g.index) for g in gpus)


def _release(host: _Host) -> Message:
    name = ENGINES[host.req.engine]
    if host.version_known:
        return later("%(engine)s %(version)s", engine=name, version=host.req.engine_version)
    return later(
        "%(engine)s (version %(version)s not understood: judged as its newest line, %(since)s and later)",
        engine=name,
        version=repr(host.req.engine_version[:40]),
        since=str(host.build.since),
    )


def _driver(host: _Host) -> Verdict:
    text, build = host.facts.driver_version, host.build
    if text is None:
        return "unknown", later("the agent did not report the driver version")
    driver = Version.parse(text)
    if driver is None:
        return "unknown", later("driver version %(text)s is not a version number", text=repr(text))
    values = dict(
        driver=str(driver), release=_release(host), needed=str(build.driver), basis=build.driver_basis
    )
    if driver >= build.driver:
        return "pass", later("driver %(driver)s ≥ %(needed)s (%(basis)s) for %(release)s", **values)
    values |= dict(floor=str(build.floor), floor_basis=build.floor_basis, caveat=build.floor_caveat)
    if driver >= build.floor:
        return "warn", later(
            "driver %(driver)s < %(needed)s (%(basis)s) for %(release)s, but ≥ %(floor)s (%(floor_basis)s): "
            "%(caveat)s; upgrade the driver",
            **values,
        )
    return "fail", later("driver %(driver)s < %(floor)s (%(floor_basis)s) for %(release)s", **values)


def _cuda(host: _Host) -> Verdict:
    text, needed = host.facts.cuda_driver_version, host.build.cuda
    if text is None:
        return "unknown", later("the agent did not report the CUDA version the driver supports")
    cuda = Version.parse(text)
    if cuda is None:
        return "unknown", later("CUDA version %(text)s is not a version number", text=repr(text))
    values = dict(cuda=str(cuda), release=_release(host), needed=str(needed))
    if needed is None:
        return "pass", later(
            "the driver supports CUDA %(cuda)s; %(release)s picks its CUDA build to suit", **values
        )
    if cuda >= needed:
        return "pass", later(
            "the driver supports CUDA %(cuda)s ≥ %(needed)s, the CUDA %(release)s is built for", **values
        )
    if cuda.parts[0] == needed.parts[0]:
        return "warn", later(
            "the driver supports CUDA %(cuda)s < %(needed)s, the CUDA %(release)s is built for: it runs by "
            "minor-version compatibility only, with a limited feature set (no PTX JIT)",
            **values,
        )
    return "fail", later(
        "the driver supports CUDA %(cuda)s < %(needed)s, the CUDA %(release)s is built for: a CUDA %(major)s "
        "build does not run on it",
        major=needed.parts[0],
        **values,
    )


def _gpus(host: _Host) -> Verdict:
    facts, req = host.facts, host.req
    if not facts.gpus:
        if facts.driver_version is None:
            return "unknown", later("NVML did not answer: no driver version and no GPUs reported")
        return "fail", later("NVML lists no GPU")
    if host.absent:
        return "fail", later(
            "GPU %(absent)s: not on this host, which has GPU %(present)s",
            absent=", ".join(map(str, host.absent)),
            present=_indexes(facts.gpus),
        )
    tp = req.tensor_parallel_size
    if len(host.gpus) < tp:
        return "fail", later(
            "tensor_parallel_size %(tp)s needs %(tp)s GPUs; the instance has %(count)s",
            tp=tp,
            count=len(host.gpus),
        )
    smallest = min(host.gpus, key=lambda g: g.memory_total_mib)
    budget = req.gpu_memory_utilization * smallest.memory_total_mib * MIB
    if req.weights_bytes is not None and req.weights_bytes / tp > budget:
        return "fail", later(
            "weights %(weights)s GiB / TP %(tp)s = %(share)s GiB per GPU > %(util)s × %(total)s GiB = "
            "%(budget)s GiB (GPU %(index)s)",
            weights=_gib(req.weights_bytes),
            tp=tp,
            share=_gib(req.weights_bytes / tp),
            util=req.gpu_memory_utilization,
            total=_gib(smallest.memory_total_mib * MIB),
            budget=_gib(budget),
            index=smallest.index,
        )
    listed = ", ".join(f"{g.index}: {g.name} ({_gib(g.memory_total_mib * MIB)} GiB)" for g in host.gpus)
    return "pass", later("%(count)s GPU(s) for the instance: %(gpus)s", count=len(host.gpus), gpus=listed)


def _no_gpus() -> Verdict:
    return "unknown", later("no GPU of the instance to judge (see the GPU item)")


def _gpus_idle(host: _Host) -> Verdict:
    if not host.gpus:
        return _no_gpus()
    busy, unread = [], []
    for g in host.gpus:
        used = g.memory_used_mib if g.memory_used_mib is not None else "?"
        if g.process_count:
            line = later(
                "GPU %(index)s: %(count)s process(es), %(used)s MiB used",
                index=g.index,
                count=g.process_count,
                used=used,
            )
            busy.append(line)
        elif g.memory_used_mib is not None and g.memory_used_mib >= BUSY_USED_MIB:
            line = later(
                "GPU %(index)s: %(used)s MiB used by processes NVML does not list (another container?)",
                index=g.index,
                used=used,
            )
            busy.append(line)
        elif g.process_count is None and g.memory_used_mib is None:
            unread.append(g)
    if busy:
        return "fail", _joined(busy)
    if unread:
        return "unknown", later(
            "NVML reported neither processes nor memory use for GPU %(gpus)s", gpus=_indexes(unread)
        )
    return "pass", later(
        "GPU %(gpus)s: no processes, under %(limit)s MiB used", gpus=_indexes(host.gpus), limit=BUSY_USED_MIB
    )


def _vllm_refusal(host: _Host, g: GpuFact) -> str:
    """vLLM's start-up error, verbatim; from 0.14 it names the device (its CUDA ordinal in
    the instance) and rounds like vLLM's format_gib."""
    util, total = host.req.gpu_memory_utilization, g.memory_total_mib * MIB
    free = _free_mib(g) * MIB
    version = Version.parse(host.req.engine_version, loose=True)
    names_device = version is None or version >= Version.of("0.14")
    device = f"on device cuda:{host.gpus.index(g)} " if names_device else "on device "
    return (
        f"Free memory {device}({round(free / GIB, 2)}/{round(total / GIB, 2)} GiB) on startup is less than "
        f"desired GPU memory utilization ({util}, {round(util * total / GIB, 2)} GiB). Decrease GPU memory "
        "utilization or reduce GPU memory used by other processes."
    )


def _free_mib(g: GpuFact) -> int:
    return g.memory_total_mib - (g.memory_used_mib or 0)


def _gpu_memory_free(host: _Host) -> Verdict:
    if not host.gpus:
        return _no_gpus()
    util = host.req.gpu_memory_utilization
    unread = [g for g in host.gpus if g.memory_used_mib is None]
    short = [g for g in host.gpus if g not in unread and _free_mib(g) < util * g.memory_total_mib]
    if short:
        lines = _joined(
            later(
                "GPU %(index)s: %(free)s MiB free < %(util)s × %(total)s MiB = %(need)s MiB",
                index=g.index,
                free=_free_mib(g),
                util=util,
                total=g.memory_total_mib,
                need=f"{util * g.memory_total_mib:.0f}",
            )
            for g in short
        )
        if host.req.engine == "vllm":
            return "fail", later(
                "%(gpus)s; vLLM refuses to start: %(error)s", gpus=lines, error=_vllm_refusal(host, short[0])
            )
        return "fail", lines
    if unread:
        return "unknown", later("NVML did not report memory use for GPU %(gpus)s", gpus=_indexes(unread))
    return "pass", later(
        "GPU %(gpus)s: free memory ≥ %(util)s × total memory", gpus=_indexes(host.gpus), util=util
    )


def _ram(host: _Host) -> Verdict:
    total, available, weights = (
        host.facts.mem_total_bytes,
        host.facts.mem_available_bytes,
        host.req.weights_bytes,
    )
    if total is None:
        return "unknown", later("the agent did not report the host's RAM")
    if weights is None:
        return "unknown", later("RAM %(total)s GiB; the model's weight size is not known", total=_gib(total))
    need = RAM_FACTOR * weights + RAM_HEADROOM_BYTES
    values = dict(total=_gib(total), weights=_gib(weights), need=_gib(need))
    if total < need:
        return "fail", later("RAM %(total)s GiB < 1.5 × %(weights)s GiB + 8 GiB = %(need)s GiB", **values)
    if available is not None and available < need:
        return "warn", later(
            "RAM %(total)s GiB, but only %(available)s GiB available < 1.5 × %(weights)s GiB + 8 GiB = "
            "%(need)s GiB: other processes hold the rest",
            available=_gib(available),
            **values,
        )
    return "pass", later("RAM %(total)s GiB ≥ 1.5 × %(weights)s GiB + 8 GiB = %(need)s GiB", **values)


def _swap(host: _Host) -> Verdict:
    swap = host.facts.swap_total_bytes
    if swap is None:
        return "unknown", later("the agent did not report swap")
    if swap == 0:
        return "warn", later("no swap: a memory peak while loading goes straight to the OOM killer")
    return "pass", later("swap %(swap)s", swap=_size(swap))


def _disk(host: _Host) -> Verdict:
    facts, weights = host.facts, host.req.weights_bytes
    where = facts.model_dir
    if facts.model_dir_exists is None:
        return "unknown", later("the agent did not say whether %(dir)s exists", dir=where)
    if facts.model_dir_exists:
        return "pass", later("%(dir)s is already on disk: nothing to download", dir=where)
    if facts.model_dir_free_bytes is None or weights is None:
        return "unknown", later(
            "%(dir)s is not there yet; the free space or the weight size is not known", dir=where
        )
    values = dict(dir=where, free=_gib(facts.model_dir_free_bytes), weights=_gib(weights))
    if facts.model_dir_free_bytes < weights:
        return "fail", later("%(free)s GiB free where %(dir)s goes < %(weights)s GiB of weights", **values)
    return "pass", later("%(free)s GiB free where %(dir)s goes ≥ %(weights)s GiB of weights", **values)


def _model_files(host: _Host) -> Verdict:
    facts, where = host.facts, host.facts.model_dir
    if facts.model_dir_exists is None:
        return "unknown", later("the agent did not say whether %(dir)s exists", dir=where)
    if not facts.model_dir_exists:
        return "warn", later("%(dir)s does not exist yet: copy the model there before starting", dir=where)
    files = facts.model_files
    if files is None:
        return "unknown", later("the agent did not list the files in %(dir)s", dir=where)
    missing = []
    if not files.config_json:
        missing.append(later("no config.json"))
    if not files.tokenizer:
        missing.append(later("no tokenizer (tokenizer.json, tokenizer.model or tokenizer_config.json)"))
    if files.safetensors_count == 0:
        missing.append(later("no *.safetensors file"))
    if shards := files.index_json_missing_shards:
        more = f" (+{len(shards) - 5})" if len(shards) > 5 else ""
        missing.append(
            later(
                "shards named in model.safetensors.index.json are missing: %(shards)s",
                shards=", ".join(shards[:5]) + more,
            )
        )
    if missing:
        return "fail", later("%(dir)s is incomplete: %(problems)s", dir=where, problems=_joined(missing))
    return "pass", later(
        "config.json, tokenizer and %(count)s safetensors file(s) (%(size)s GiB) in %(dir)s",
        count=files.safetensors_count,
        size=_gib(files.safetensors_bytes),
        dir=where,
    )


def _shm(host: _Host) -> Verdict:
    shm, tp = host.facts.shm_total_bytes, host.req.tensor_parallel_size
    if shm is None:
        return "unknown", later("the agent did not report the size of /dev/shm")
    if shm >= SHM_NEEDED_BYTES:
        return "pass", later("/dev/shm %(shm)s ≥ 1 GiB", shm=_size(shm))
    if tp > 1:
        return "fail", later(
            '/dev/shm %(shm)s < 1 GiB with tensor_parallel_size %(tp)s: NCCL fails to start ("failed to '
            "extend /dev/shm/nccl-…\"); Docker's default is 64 MiB: run the container with --ipc=host or "
            "--shm-size=1g",
            shm=_size(shm),
            tp=tp,
        )
    return "warn", later(
        "/dev/shm %(shm)s < 1 GiB: enough for one GPU, but PyTorch shares tensors between processes "
        "through it; vLLM's docs ask containers for --ipc=host or --shm-size",
        shm=_size(shm),
    )


def _port(host: _Host) -> Verdict:
    facts, port = host.facts, host.req.port
    if facts.port != port:
        return "unknown", later(
            "the agent checked port %(checked)s; the instance wants %(port)s", checked=facts.port, port=port
        )
    if facts.port_listener is not None:
        return "fail", later("port %(port)s is in use: %(listener)s", port=port, listener=facts.port_listener)
    return "pass", later("port %(port)s is free", port=port)


def _docker(host: _Host) -> Verdict:
    text = host.facts.docker_version
    if text is None:
        return "unknown", later("no Docker found (needed only to deploy in a container)")
    version = Version.parse(text, loose=True)
    if version is None:
        return "unknown", later("Docker version %(text)s is not a version number", text=repr(text))
    if version < Version.of("19.03"):
        return "warn", later(
            "Docker %(version)s: docker run --gpus needs 19.03 or newer", version=str(version)
        )
    return "pass", later("Docker %(version)s", version=str(version))


def _numa(host: _Host) -> Verdict:
    if host.facts.cpu_numa_nodes == 1:
        return "pass", later("one NUMA node: every GPU is local")
    if not host.gpus:
        return _no_gpus()
    nodes = sorted({g.numa_node for g in host.gpus if g.numa_node is not None and g.numa_node >= 0})
    if not nodes:
        return "unknown", later("NVML did not report the GPUs' NUMA nodes")
    listed = ", ".join(map(str, nodes))
    if len(nodes) == 1:
        return "pass", later("GPU %(gpus)s on NUMA node %(node)s", gpus=_indexes(host.gpus), node=listed)
    per_node: dict[int, list[GpuFact]] = {}
    for g in host.facts.gpus:
        if g.numa_node is not None and g.numa_node >= 0:
            per_node.setdefault(g.numa_node, []).append(g)
    node, local = max(per_node.items(), key=lambda item: len(item[1]))
    if host.req.gpu_indexes and len(local) >= len(host.gpus):
        return "warn", later(
            "GPU %(gpus)s span NUMA nodes %(nodes)s: traffic crosses the CPU interconnect (guide 2.2.3); "
            "node %(node)s alone has GPU %(local)s",
            gpus=_indexes(host.gpus),
            nodes=listed,
            node=node,
            local=_indexes(local),
        )
    return "pass", later(
        "GPU %(gpus)s span NUMA nodes %(nodes)s, which no single node's GPUs could avoid",
        gpus=_indexes(host.gpus),
        nodes=listed,
    )


CHECKS: tuple[tuple[str, Message, Callable[[_Host], Verdict]], ...] = (
    ("driver", later("NVIDIA driver"), _driver),
    ("cuda", later("CUDA the driver supports"), _cuda),
    ("gpus", later("GPUs visible, with room for the weights"), _gpus),
    ("gpus_idle", later("GPUs idle"), _gpus_idle),
    ("gpu_memory_free", later("Free GPU memory"), _gpu_memory_free),
    ("ram", later("System memory"), _ram),
    ("swap", later("Swap"), _swap),
    ("disk", later("Disk space for the model"), _disk),
    ("model_files", later("Model files complete"), _model_files),
    ("shm", later("Shared memory (/dev/shm)"), _shm),
    ("port", later("Port free"), _port),
    ("docker", later("Docker (information)"), _docker),
    ("numa", later("NUMA placement"), _numa),
)


def run_checklist(*, facts: PredeployFacts, requirements: PredeployRequirements) -> list[ChecklistItem]:
    """The pre-deploy checklist for this host and instance, one item per check in the
    guide's order (4.1.1, plus idle GPUs, free GPU memory and swap). An empty
    `gpu_indexes` means the instance uses every GPU the host has."""
    build, known = engine_build(engine=requirements.engine, version=requirements.engine_version)
    by_index = {g.index: g for g in facts.gpus}
    wanted = requirements.gpu_indexes or tuple(by_index)
    host = _Host(
        facts=facts,
        req=requirements,
        build=build,
        version_known=known,
        gpus=tuple(by_index[i] for i in wanted if i in by_index),
        absent=tuple(i for i in wanted if i not in by_index),
    )
    items = []
    for key, title, check in CHECKS:
        status, evidence = check(host)
        items.append(ChecklistItem(key=key, title=title, status=status, evidence=evidence))
    return items


OVERALL_LABELS: dict[str, Message] = {
    "ready": later("ready"),
    "ready with warnings": later("ready with warnings"),
    "not ready": later("not ready"),
    "incomplete": later("incomplete"),
}


@dataclass(frozen=True, kw_only=True)
class ChecklistSummary:
    counts: dict[str, int]  # every status, zero included
    overall: Overall

    @property
    def label(self) -> Message:
        return OVERALL_LABELS[self.overall]


def checklist_summary(items: Sequence[ChecklistItem]) -> ChecklistSummary:
    """Counts per status and the verdict: any fail is "not ready"; else a missing fact
    (outside the informational items) is "incomplete"; else any warning is "ready with
    warnings"; else "ready"."""
    counts = {
        status: sum(item.status == status for item in items) for status in ("pass", "fail", "warn", "unknown")
    }
    overall: Overall = "ready"
    if counts["fail"]:
        overall = "not ready"
    elif any(item.status == "unknown" and item.key not in INFORMATIONAL for item in items):
        overall = "incomplete"
    elif counts["warn"]:
        overall = "ready with warnings"
    return ChecklistSummary(counts=counts, overall=overall)
