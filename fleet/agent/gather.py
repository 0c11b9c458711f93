"""The facts of the pre-deploy checklist (guide 4.1.1), gathered on the host by its agent:
NVML (driver, CUDA, GPUs and their processes), /proc/meminfo, the model directory's disk and
files, /dev/shm, the port's listener, Docker's version and the NUMA nodes. The console judges
them (fleet.hostchecks.predeploy); every fact the host cannot give is None ("unknown")."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from fleet.hostchecks import disks, memory, numa, ports
from fleet.hostchecks.docker_api import DockerClient
from fleet.hostchecks.docker_errors import DockerError
from fleet.hostchecks.predeploy_facts import GpuFact, ModelFiles, PredeployFacts
from fleet.nvml.base import NvmlReading

if TYPE_CHECKING:
    from fleet.agent.worker import AgentConfig

MAX_FILES = 10_000  # entries of the model directory looked at
MAX_INDEX_BYTES = 4 * 1024 * 1024
TOKENIZERS = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")


def predeploy_facts(
    *, config: AgentConfig, reading: NvmlReading | None, model_dir: str, port: int
) -> PredeployFacts:
    root = Path(config.root)
    meminfo = memory.read_meminfo(root=root)
    model_space = disks.path_space(model_dir, root=root)
    if not model_space.exists:  # not there yet: the disk it would land on
        model_space = disks.path_space(str(PurePosixPath(model_dir).parent), root=root)
    shm = disks.path_space("/dev/shm", root=root)
    topology = numa.read_topology(root=root)
    local = root / PurePosixPath(model_dir).relative_to("/") if model_dir.startswith("/") else None
    return PredeployFacts(
        driver_version=reading.driver_version if reading else None,
        cuda_driver_version=reading.cuda_version if reading else None,
        gpus=tuple(_gpu(g, root) for g in reading.gpus) if reading else (),
        mem_total_bytes=meminfo.total_bytes,
        mem_available_bytes=meminfo.available_bytes,
        swap_total_bytes=meminfo.swap_total_bytes,
        model_dir=model_dir,
        model_dir_exists=local.is_dir() if local else None,
        model_dir_free_bytes=model_space.available_bytes,
        model_files=_model_files(local) if local and local.is_dir() else None,
        shm_total_bytes=shm.total_bytes,
        port=port,
        port_listener=_listener(ports.listener(port, root=root)),
        docker_version=_docker_version(config),
        cpu_numa_nodes=len(topology.cpus_by_node) or None,
    )


def _listener(listener: ports.Listener | None) -> str | None:
    if listener is None:
        return None
    if listener.pid is None:
        return "a process the agent cannot see"
    return f"PID {listener.pid} {listener.process}".strip()


def _gpu(gpu, root: Path) -> GpuFact:
    node = gpu.numa_node if gpu.numa_node is not None else numa.gpu_node(gpu.pci_bus_id, root=root)
    return GpuFact(
        index=gpu.index,
        name=gpu.name,
        memory_total_mib=gpu.memory_total_mib,
        memory_used_mib=gpu.memory_used_mib,
        process_count=len(gpu.processes),
        numa_node=node,
    )


def _model_files(directory: Path) -> ModelFiles:
    names, sizes = set(), 0
    shards = 0
    for index, entry in enumerate(directory.iterdir()):
        if index >= MAX_FILES:
            break
        names.add(entry.name)
        if entry.name.endswith(".safetensors") and entry.is_file():
            shards += 1
            sizes += entry.stat().st_size
    return ModelFiles(
        config_json="config.json" in names,
        tokenizer=any(name in names for name in TOKENIZERS),
        safetensors_count=shards,
        safetensors_bytes=sizes,
        index_json_missing_shards=tuple(sorted(_named_shards(directory) - names))[:100],
    )


def _named_shards(directory: Path) -> set[str]:
    """The shard files model.safetensors.index.json names (its weight_map's values)."""
    index = directory / "model.safetensors.index.json"
    try:
        if not index.is_file() or index.stat().st_size > MAX_INDEX_BYTES:
            return set()
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
    except (OSError, ValueError, AttributeError, RecursionError):  # RecursionError: nested past reason
        return set()
    return {v for v in weight_map.values() if isinstance(v, str)} if isinstance(weight_map, dict) else set()


def _docker_version(config: AgentConfig) -> str | None:
    if not Path(config.docker_socket).exists():
        return None
    try:
        with DockerClient(config.docker_socket) as client:
            return client.version().version
    except DockerError:
        return None
