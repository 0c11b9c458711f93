"""One worker's probe cycle (health + metrics scrape + parse + judge + store) over a
simulated fleet, against a bare fetch and against real Prometheus scraping the same targets.

The simulator runs in its own process (`manage.py simulate`), as it would on other
machines, so the figures are the prober's own. The bare fetch is the floor: the same
/health and /metrics requests with the same concurrency through one shared httpx client,
doing nothing with the answers (the same fetch through the prober's own client is printed
beside it). The CPU figures are the prober process's user + system time
(resource.getrusage, all its threads) over the measured cycles, per probed instance:

- the sweep's cycle probes each instance's /health (the light check, phases timed) and
  /metrics (engines without one, Ollama, only /health), then judges and stores;
- the metrics-only cycle scrapes /metrics alone, then judges and stores: the nearest to
  what Prometheus does per target, so the ratio to Prometheus is printed for both.

Prometheus (benchmarks.prometheus_cpu) runs after the cycles, while the prober is idle:
on two cores, running both at once would slow each and blur both CPU figures.
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks import aims, services

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
    # Its own host's instances only: other benchmarks of the run leave theirs in the database.
    mine = Instance.objects.filter(host=host).order_by("pk")
    return list(mine.select_related("host").prefetch_related("gpus", "gateways"))


async def _bare_fetch(urls: list[str], concurrency: int) -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    semaphore = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:

        async def get(url: str) -> None:
            async with semaphore:
                await (await client.get(url)).aread()

        await asyncio.gather(*(get(u) for u in urls))


async def _bare_probe_client_fetch(bases: list[tuple[str, bool]], concurrency: int) -> int:
    """/health then /metrics of each instance through the prober's own client, one client
    (and one kept connection) per instance as in a sweep; the connections opened."""
    from fleet.probes.fetch import make_instance_client
    from fleet.probes.target import ProbeLimits

    limits, semaphore, opened = ProbeLimits(), asyncio.Semaphore(concurrency), []

    async def get(base: str, has_metrics: bool) -> None:
        async with semaphore, make_instance_client(limits=limits) as client:
            for path in ("/health", "/metrics") if has_metrics else ("/health",):
                await client.request(
                    "GET", base + path, max_bytes=limits.max_body_bytes, prefix_bytes=65536,
                    trace=lambda _: None, fresh=path == "/health",
                )  # fmt: skip
            opened.append(client.connects)

    await asyncio.gather(*(get(b, m) for b, m in bases))
    return sum(opened)


@dataclass
class _Cycle:
    wall_s: float
    cpu_s: float  # the whole cycle: probe, judge, store
    probe_cpu_s: float  # probe_many alone
    probed: int
    down: int
    rss_mib: float


def _cycle(instances: list, concurrency: int, kinds: frozenset) -> _Cycle:
    from fleet.models import ProbeSettings, Trigger
    from fleet.probe_service import limits_from, record_probes, target_for
    from fleet.probes.instance_probe import probe_many

    settings = ProbeSettings.current()
    started, cpu = time.perf_counter(), services.cpu_s()
    probes = asyncio.run(
        probe_many(targets=[target_for(i) for i in instances], previous_scrapes={},
                   limits=limits_from(settings), concurrency=concurrency, kinds=kinds, light_health=True)
    )  # fmt: skip
    probe_cpu = services.cpu_s() - cpu
    runs = record_probes(instances=instances, probes=probes, trigger=Trigger.SCHEDULE, settings=settings)
    return _Cycle(
        wall_s=time.perf_counter() - started,
        cpu_s=services.cpu_s() - cpu,
        probe_cpu_s=probe_cpu,
        probed=len(probes),
        down=sum(1 for r in runs if r.verdict == "down"),
        rss_mib=_peak_rss_mib(),
    )


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _timed(fn, *args):
    started = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - started, result


def _all(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _has_metrics(engine: str) -> bool:
    from fleet.probes.engines import dialect_for

    return dialect_for(engine).has_metrics


def _prometheus(rows: list, prometheus_interval_s: float, prometheus_intervals: int):
    from benchmarks import prometheus_cpu

    if not prometheus_cpu.available():
        print(
            f"  Prometheus: {prometheus_cpu.PROMETHEUS} is not installed (Debian: apt-get install prometheus)"
        )
        return None
    targets = [i.base_url.removeprefix("http://") for i in rows if _has_metrics(i.engine)]
    figures = prometheus_cpu.measure(
        targets=targets, interval_s=prometheus_interval_s, intervals=prometheus_intervals
    )
    print(
        f"  Prometheus scraping the {len(targets)} /metrics targets every {prometheus_interval_s:g} s "
        f"({figures.targets_up} up): {figures.scrapes} scrapes in {figures.window_s:.0f} s, "
        f"{figures.cpu_s:.2f} CPU-s: {figures.cpu_per_scrape_s * 1e3:.2f} ms CPU per scrape "
        f"({figures.samples / max(1, figures.scrapes):.0f} samples appended per scrape)"
    )
    return figures


def run(
    *,
    instances: int,
    base_port: int,
    concurrency: int,
    repeat: int,
    prometheus_interval_s: float = 2.0,
    prometheus_intervals: int = 10,
) -> int:
    from fleet.probes.parts import ProbeKind

    print(f"probe cycle benchmark: {instances} simulated instances, concurrency {concurrency}, {repeat} runs")
    simulator = _start_simulator(instances=instances, base_port=base_port)
    swept = frozenset({ProbeKind.HEALTH, ProbeKind.METRICS})
    metrics_only = frozenset({ProbeKind.METRICS})
    try:
        rows = _inventory(instances=instances, base_port=base_port)
        scraped = sum(1 for i in rows if _has_metrics(i.engine))
        urls = [f"{i.base_url}{path}" for i in rows for path in ("/health", "/metrics")]
        bases = [(i.base_url, _has_metrics(i.engine)) for i in rows]
        rss_before = _peak_rss_mib()
        bares, own_bares, cycles, scrapes = [], [], [], []
        connects = 0
        # Alternated, so a busy moment of the machine falls on all alike.
        for _ in range(repeat):
            bares.append(_timed(lambda: asyncio.run(_bare_fetch(urls, concurrency)))[0])
            wall, connects = _timed(lambda: asyncio.run(_bare_probe_client_fetch(bases, concurrency)))
            own_bares.append(wall)
            cycles.append(_cycle(rows, concurrency, swept))
            scrapes.append(_cycle(rows, concurrency, metrics_only))
        bare, own_bare = min(bares), min(own_bares)
        best = min(cycles, key=lambda c: c.wall_s)
        print(
            f"  bare httpx fetch of /health + /metrics (best of {repeat}): {bare:.2f} s  (all: {_all(bares)})"
        )
        print(
            f"  the same through the prober's client, /metrics on /health's connection: {own_bare:.2f} s "
            f"(all: {_all(own_bares)}; {connects} connections for {len(rows)} instances)"
        )
        print(
            f"  probe cycle wall time (best of {repeat}): {best.wall_s:.2f} s  "
            f"(all: {_all([c.wall_s for c in cycles])})"
        )
        print(f"  instances per second: {best.probed / best.wall_s:.0f}   (aim: >= 100)")
        print(f"  ratio cycle / bare httpx fetch: {best.wall_s / bare:.2f}   (aim: <= 1.3)")
        print(f"  ratio cycle / bare fetch through the prober's client: {best.wall_s / own_bare:.2f}")
        aims.note("probe cycle / bare httpx fetch (wall)", best.wall_s / bare, 1.3)
        per_instance = min(c.cpu_s for c in cycles) / best.probed
        probe_only = min(c.probe_cpu_s for c in cycles) / best.probed
        per_scrape = min(c.cpu_s for c in scrapes) / scraped
        print(
            f"  prober CPU per instance, health + metrics cycle: {per_instance * 1e3:.2f} ms "
            f"(probing alone {probe_only * 1e3:.2f} ms; judging and storing the rest)"
        )
        print(
            f"  prober CPU per scraped instance, metrics-only cycle (scrape, parse, judge, store): "
            f"{per_scrape * 1e3:.2f} ms  (probing alone "
            f"{min(c.probe_cpu_s for c in scrapes) / scraped * 1e3:.2f} ms)"
        )
        peak = cycles[-1].rss_mib
        print(
            f"  peak RSS of the prober's process: {peak:.0f} MiB ({peak - rss_before:+.0f} MiB over the "
            f"cycles; {rss_before:.0f} MiB before them, benchmarks run earlier in the process included)"
        )
        print(f"  instances down: {best.down} of {best.probed}")
        figures = _prometheus(rows, prometheus_interval_s, prometheus_intervals)
        if figures is not None and figures.scrapes:
            prom = figures.cpu_per_scrape_s
            print(
                f"  ratio prober CPU / Prometheus CPU per target: metrics-only {per_scrape / prom:.2f}, "
                f"health + metrics {per_instance / prom:.2f}   (aim: <= 2)"
            )
            aims.note("prober CPU / Prometheus CPU, metrics only", per_scrape / prom, 2)
            aims.note("prober CPU / Prometheus CPU, health + metrics", per_instance / prom, 2)
    finally:
        services.stop(simulator)
    return 0
