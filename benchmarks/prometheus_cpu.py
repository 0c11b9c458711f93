"""Real Prometheus scraping the simulated fleet: its CPU-seconds per scrape, the yardstick
for the prober's CPU per probed instance (benchmarks.probe_cycle prints both).

Prometheus (/usr/bin/prometheus, Debian's package) runs with a temporary configuration
and storage directory on a free loopback port, with the simulator's /metrics URLs as
static targets. After a warm-up of two intervals (a target's first scrape records no
interval), it reads its own /metrics twice, `intervals` scrape intervals apart:

- CPU: `process_cpu_seconds_total` (user + system, as /proc/<pid>/stat counts it);
- scrapes: `prometheus_target_interval_length_seconds_count`, summed. Prometheus observes
  one interval per scrape of a target after its first, so between two reads its increase
  is the number of scrapes made. `prometheus_tsdb_head_samples_appended_total` over the
  samples one scrape of each target appends is printed beside it, as a check.

It runs while the prober is idle: on two cores two CPU-bound processes at once would
slow each other's wall time and blur both CPU figures through cache and scheduler effects.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

PROMETHEUS = "/usr/bin/prometheus"


@dataclass(frozen=True)
class PrometheusFigures:
    cpu_s: float
    scrapes: int
    samples: float
    window_s: float
    targets_up: int

    @property
    def cpu_per_scrape_s(self) -> float:
        return self.cpu_s / self.scrapes if self.scrapes else float("nan")


def available() -> bool:
    return shutil.which(PROMETHEUS) is not None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(targets: list[str], interval_s: float) -> str:
    listed = ", ".join(f'"{t}"' for t in targets)
    return (
        "global:\n"
        f"  scrape_interval: {interval_s:g}s\n"
        f"  scrape_timeout: {interval_s:g}s\n"
        "scrape_configs:\n"
        "  - job_name: simulated\n"
        "    static_configs:\n"
        f"      - targets: [{listed}]\n"
    )


def _read(client: httpx.Client, url: str) -> dict[str, float]:
    wanted = (
        "process_cpu_seconds_total",
        "prometheus_target_interval_length_seconds_count",
        "prometheus_tsdb_head_samples_appended_total",
    )
    totals = dict.fromkeys(wanted, 0.0)
    for line in client.get(url).text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in totals:
            totals[name] += float(line.rsplit(" ", 1)[1])
    return totals


def _query(client: httpx.Client, base: str, expr: str) -> float:
    result = client.get(f"{base}/api/v1/query", params={"query": expr}).json()["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def _wait_ready(client: httpx.Client, base: str, process: subprocess.Popen, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("prometheus exited at start")
        with contextlib.suppress(httpx.HTTPError):
            if client.get(f"{base}/-/ready").status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError("prometheus was not ready within 30 s")


def measure(*, targets: list[str], interval_s: float = 2.0, intervals: int = 10) -> PrometheusFigures:
    """Prometheus's CPU-seconds and scrapes over `intervals` intervals of scraping `targets`
    (host:port, /metrics), after a warm-up of two intervals."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="bench-prometheus-") as scratch:
        config = Path(scratch, "prometheus.yml")
        config.write_text(_config(targets, interval_s))
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={scratch}/data",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            with httpx.Client(timeout=10, trust_env=False) as client:
                _wait_ready(client, base, process, 30)
                time.sleep(2 * interval_s)
                before, started = _read(client, f"{base}/metrics"), time.monotonic()
                time.sleep(intervals * interval_s)
                after, window = _read(client, f"{base}/metrics"), time.monotonic() - started
                up = int(_query(client, base, 'count(up{job="simulated"} == 1)'))
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    delta = {name: after[name] - before[name] for name in after}
    return PrometheusFigures(
        cpu_s=delta["process_cpu_seconds_total"],
        scrapes=int(delta["prometheus_target_interval_length_seconds_count"]),
        samples=delta["prometheus_tsdb_head_samples_appended_total"],
        window_s=window,
        targets_up=up,
    )
