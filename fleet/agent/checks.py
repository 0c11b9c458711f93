"""The host-side checks an agent runs for its snapshot (agent.snapshot), read through the
agent's root (fleet.hostchecks: plain modules, tested on fixture trees). Every part is
bounded and reports its own trouble instead of failing the whole snapshot; secrets never
leave the host (argv is redacted, container environments are never read).

The snapshot is JSON: {taken_at, memory, engines, instances, containers, kernel, disks,
numa, problems}. The console compares it with the inventory (fleet.agent.snapshot_view)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.hostchecks import disks, kernel_log, memory, numa, ports, processes
from fleet.hostchecks.docker_api import DockerClient, DockerError
from fleet.hostchecks.launch_flags import parse_launch_flags
from fleet.nvml.base import NvmlReading

if TYPE_CHECKING:
    from fleet.agent.worker import AgentConfig

MAX_EVENTS = 20  # the newest XIDs and OOM kills kept
MAX_ENGINES = 32
SHM = "/dev/shm"


def _message(value: Any) -> Any:
    return value.to_json() if hasattr(value, "to_json") else value


def snapshot(
    *, config: AgentConfig, expect: dict[str, Any], reading: NvmlReading | None = None
) -> dict[str, Any]:
    root = Path(config.root)
    problems: list[Any] = []
    scan = processes.scan_processes(root=root)
    if scan.unreadable:
        problems.append(_message(scan.unreadable))
    listening = ports.listeners(root=root)
    if listening.unreadable:
        problems.append(_message(listening.unreadable))
    kernel = kernel_log.read_kernel_log(root=root)
    topology = numa.read_topology(root=root)
    engines = [
        _engine(e, kernel=kernel, listening=listening, reading=reading, topology=topology, root=root)
        for e in scan.engines[:MAX_ENGINES]
    ]
    return {
        "taken_at": round(time.time(), 3),
        "memory": memory.read_meminfo(root=root).to_dict(),
        "engines": engines,
        "instances": [_instance(i, listening=listening, engines=engines) for i in _expected(expect)],
        "containers": _containers(config, engines, problems),
        "kernel": {
            "xids": [x.to_dict() for x in kernel.xids[-MAX_EVENTS:]],
            "oom_kills": [k.to_dict() for k in kernel.oom_kills[-MAX_EVENTS:]],
            "unreadable": _message(kernel.unreadable),
            "truncated": kernel.truncated,
        },
        "disks": [disks.path_space(path, root=root).to_dict() for path in _paths(engines)],
        "numa": topology.to_dict(),
        "problems": problems,
    }


def _expected(expect: dict[str, Any]) -> list[dict[str, Any]]:
    """The inventory's instances on this host, as the console sent them (checked: the task
    arrived through the broker)."""
    rows = expect.get("instances") if isinstance(expect, dict) else None
    out = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("port"), int) and 0 < row["port"] < 65536:
            out.append({"name": str(row.get("name", ""))[:63], "port": row["port"]})
    return out[:MAX_ENGINES]


def _engine(engine, *, kernel, listening, reading, topology, root: Path) -> dict[str, Any]:
    pids = {engine.pid, *engine.child_pids}
    gpus = _gpus_of(pids, reading)
    gpu_nodes = [numa.gpu_node(g.pci_bus_id, root=root) for g in gpus]
    binding = numa.binding_check(cpus_allowed=engine.cpus_allowed, gpu_nodes=gpu_nodes, topology=topology)
    return engine.to_dict() | {
        "argv": list(engine.argv[:400]),
        "flags": parse_launch_flags(engine.argv),
        "ports": sorted({lst.port for lst in listening.listeners if lst.pid in pids}),
        "gpus": [g.index for g in gpus],
        "oom_kills": [k.to_dict() for k in kernel.matched_to(pids)[-MAX_EVENTS:]],
        "numa_binding": binding.to_dict() | {"message": _message(binding.message)},
    }


def _gpus_of(pids: set[int], reading: NvmlReading | None) -> list:
    if reading is None:
        return []
    return [g for g in reading.gpus if any(p.pid in pids for p in g.processes)]


def _instance(row: dict[str, Any], *, listening, engines: list[dict[str, Any]]) -> dict[str, Any]:
    """Who listens on the instance's port, and which engine process that is."""
    on_port = listening.on_port(row["port"])
    listener = on_port[0].to_dict() if on_port else None
    pid = listener.get("pid") if listener else None
    engine = next((e["pid"] for e in engines if pid and (pid == e["pid"] or pid in e["child_pids"])), None)
    return row | {"listener": listener, "engine_pid": engine}


def _containers(config: AgentConfig, engines: list[dict[str, Any]], problems: list[Any]) -> list[dict]:
    ids = sorted({e["container_id"] for e in engines if e.get("container_id")})
    if not ids or not Path(config.docker_socket).exists():
        return []
    found = []
    with DockerClient(config.docker_socket) as client:
        for container_id in ids[:MAX_ENGINES]:
            try:
                found.append(client.inspect(container_id).to_dict())
            except DockerError as exc:
                problems.append(_message(exc.message))
                if exc.fault.name in ("SOCKET_MISSING", "PERMISSION_DENIED", "UNREACHABLE", "TIMEOUT"):
                    break
    return found


def _paths(engines: list[dict[str, Any]]) -> list[str]:
    """The engines' model directories (absolute --model paths) and /dev/shm."""
    models = {
        str(e["flags"]["model"])
        for e in engines
        if isinstance(e["flags"].get("model"), str) and e["flags"]["model"].startswith("/")
    }
    return [*sorted(models)[:MAX_ENGINES], SHM]
