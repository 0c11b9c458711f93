"""One worker's probe cycle (health + metrics scrape + parse + store) over a simulated fleet.

The simulator runs in its own process (`manage.py simulate`), as it would on other
machines, so the figures are the prober's own. The bare fetch is the floor: the same
/health and /metrics requests with the same concurrency, doing nothing with the answers.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def _start_simulator(*, instances: int, base_port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "manage.py", "simulate", "--instances", str(instances),
         "--base-port", str(base_port)],
        cwd=ROOT, env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    last = base_port + instances - 1
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", last), timeout=0.5).close()
            return process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the simulator exited: {process.stderr.read().decode()[-2000:]}"
                ) from None
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the simulator did not start within 120 s")


def _inventory(*, instances: int, base_port: int) -> list:
    from fleet.models import GpuHost, Instance
    from fleet.simulator.spec import specs_for

    host = GpuHost.objects.create(name="bench-host", address="127.0.0.1")
    rows = [
        Instance(name=s.name, host=host, engine=s.engine, engine_version=s.version,
                 base_url=f"http://127.0.0.1:{s.port}", served_model_name=s.served_model_name,
                 max_num_seqs=s.max_num_seqs, max_model_len=s.max_model_len)
        for s in specs_for(instances, base_port)
    ]  # fmt: skip
    Instance.objects.bulk_create(rows)
    return list(Instance.objects.select_related("host").prefetch_related("gpus", "gateways"))


async def _bare_fetch(urls: list[str], concurrency: int) -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    semaphore = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:

        async def get(url: str) -> None:
            async with semaphore:
                await (await client.get(url)).aread()

        await asyncio.gather(*(get(u) for u in urls))


def _cycle(instances: list, concurrency: int) -> tuple[int, int]:
    from fleet.models import ProbeSettings, Trigger
    from fleet.probe_service import limits_from, record_probes, target_for
    from fleet.probes.instance_probe import probe_many
    from fleet.probes.parts import ProbeKind

    SWEPT = {ProbeKind.HEALTH, ProbeKind.METRICS}  # noqa: N806

    settings = ProbeSettings.current()
    probes = asyncio.run(
        probe_many(targets=[target_for(i) for i in instances], previous_scrapes={},
                   limits=limits_from(settings), concurrency=concurrency, kinds=SWEPT, light_health=True)
    )  # fmt: skip
    runs = record_probes(instances=instances, probes=probes, trigger=Trigger.SCHEDULE, settings=settings)
    return len(probes), sum(1 for r in runs if r.verdict == "down")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _timed(fn, *args):
    started = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - started, result


def run(*, instances: int, base_port: int, concurrency: int, repeat: int) -> int:
    print(f"probe cycle benchmark: {instances} simulated instances, concurrency {concurrency}, {repeat} runs")
    simulator = _start_simulator(instances=instances, base_port=base_port)
    try:
        rows = _inventory(instances=instances, base_port=base_port)
        urls = [f"{i.base_url}{path}" for i in rows for path in ("/health", "/metrics")]
        rss_before = _peak_rss_mib()
        bares, cycles = [], []
        # Alternated, so a busy moment of the machine falls on both alike.
        for _ in range(repeat):
            bares.append(_timed(lambda: asyncio.run(_bare_fetch(urls, concurrency)))[0])
            wall, (probed, down) = _timed(_cycle, rows, concurrency)
            cycles.append((wall, _peak_rss_mib(), probed, down))
        bare, best = min(bares), min(cycles)
        print(
            f"  bare fetch of /health + /metrics (best of {repeat}): {bare:.2f} s  (all: "
            + ", ".join(f"{b:.2f}" for b in bares)
            + ")"
        )
        print(
            f"  probe cycle wall time (best of {repeat}): {best[0]:.2f} s  (all: "
            + ", ".join(f"{c[0]:.2f}" for c in cycles)
            + ")"
        )
        print(f"  instances per second: {best[2] / best[0]:.0f}   (aim: >= 100)")
        print(f"  ratio cycle / bare fetch: {best[0] / bare:.2f}   (aim: < 1.5)")
        peak = cycles[-1][1]
        print(f"  peak RSS of the prober: {peak:.0f} MiB ({peak - rss_before:+.0f} MiB over the cycles)")
        print(f"  instances down: {best[3]} of {best[2]}")
    finally:
        simulator.send_signal(signal.SIGINT)
        try:
            simulator.wait(timeout=30)
        except subprocess.TimeoutExpired:
            simulator.kill()
    return 0
