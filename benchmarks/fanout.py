"""A scheduled sweep fanned out over 1, 2 and 4 prober worker processes.

The simulator serves the fleet from its own process; the bench seeds the fleet in the
inventory, then, for each worker count, starts that many real `celery -A ops_console worker
--queues probes --pool solo --concurrency 1` processes and sends the sweeps as beat does: the
health and metrics kinds at once, each in chunks of PROBE_CHUNK_SIZE. It times each sweep from
the dispatch of its chunks to the last cycle's finished_at (written by the worker that ends
the last chunk), after one untimed sweep that starts the workers' connections.

The workers and the bench share PostgreSQL (bench_fanout) when it is reachable, since
SQLite with four writers would measure its lock rather than the probers, and Redis as the
broker when reachable (else the filesystem broker); the figures say which ran.

    python -m benchmarks.fanout --instances 4000 --workers 1 2 4
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import services

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
KINDS = ("health", "metrics")  # what beat sends together every 30 s
DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/bench_fanout"
DEFAULT_BROKER = "redis://127.0.0.1:6379/13"


def run(
    *,
    instances: int = 4000,
    base_port: int = 27000,
    workers: tuple[int, ...] = (1, 2, 4),
    repeat: int = 2,
    chunk_size: int | None = None,
    database_url: str = DEFAULT_DATABASE,
    broker_url: str = DEFAULT_BROKER,
) -> int:
    """Run the measurement in a process of its own, on the shared database and broker (the
    caller's Django may be set up on another database)."""
    with tempfile.TemporaryDirectory(prefix="ops-fanout-") as var_dir:
        env = os.environ | {"OPS_VAR_DIR": var_dir, "DJANGO_SETTINGS_MODULE": "ops_console.settings"}
        if database_url and database_url.startswith("postgres") and services.reachable(database_url, 5432):
            env["DATABASE_URL"] = database_url
        else:
            env["DATABASE_URL"] = f"sqlite:///{var_dir}/fanout.sqlite3"
        env.pop("CELERY_BROKER_URL", None)
        if broker_url and services.reachable(broker_url, 6379):
            env["CELERY_BROKER_URL"] = broker_url
        if chunk_size:
            env["PROBE_CHUNK_SIZE"] = str(chunk_size)
        args = ["--instances", str(instances), "--base-port", str(base_port), "--repeat", str(repeat)]
        command = [sys.executable, "-m", "benchmarks.fanout", "--measure", *args, "--workers"]
        return subprocess.run([*command, *map(str, workers)], cwd=ROOT, env=env, check=False).returncode


# --- in the measuring process (Django set up on the shared database) -----------------------


def _prepare_database() -> str:
    from django.conf import settings
    from django.core.management import call_command

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("postgresql"):
        import psycopg

        params = {"host": database["HOST"] or "127.0.0.1", "port": database["PORT"] or 5432}
        with psycopg.connect(dbname="postgres", user=database["USER"], autocommit=True, **params) as admin:
            if not admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [database["NAME"]]
            ).fetchone():
                admin.execute(f'CREATE DATABASE "{database["NAME"]}"')
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    return f"{database['ENGINE'].rsplit('.', 1)[-1]} {database['NAME']}"


def _start_workers(count: int, log_dir: Path) -> list[tuple[subprocess.Popen, Path]]:
    started = []
    for i in range(count):
        log = log_dir / f"worker-{i}.log"
        command = [str(BIN / "celery"), "-A", "ops_console", "worker", "--queues", "probes", "--pool", "solo",
                   "--concurrency", "1", "--without-gossip", "--without-mingle", "--without-heartbeat",
                   "--hostname", f"fanout-{i}@%h", "--loglevel", "INFO", "--logfile", str(log)]  # fmt: skip
        process = subprocess.Popen(command, cwd=ROOT, env=os.environ.copy(), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        started.append((process, log))
    deadline = time.monotonic() + 120
    while not all(log.exists() and " ready." in log.read_text() for _, log in started):
        if time.monotonic() > deadline or any(p.poll() is not None for p, _ in started):
            _stop(started)
            raise RuntimeError("the prober workers did not start: " + started[0][1].read_text()[-2000:])
        time.sleep(0.2)
    return started


def _stop(workers: list[tuple[subprocess.Popen, Path]]) -> None:
    for process, _ in workers:
        process.send_signal(signal.SIGTERM)
    for process, _ in workers:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def _sweep(timeout: float = 600.0) -> tuple[float, list]:
    """Send the health and metrics sweeps as beat does; seconds from the first dispatch to
    the last cycle's finished_at, and the cycles."""
    from django.utils import timezone

    from fleet.models import ProbeCycle
    from fleet.tasks import probe_cycle

    sent_at = timezone.now()
    for kind in KINDS:
        probe_cycle(kind=kind)
    deadline = time.monotonic() + timeout
    while ProbeCycle.objects.filter(started_at__gte=sent_at, finished_at=None).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the sweeps did not finish within {timeout:.0f} s")
        time.sleep(0.05)
    cycles = list(ProbeCycle.objects.filter(started_at__gte=sent_at, skipped=False))
    return (max(c.finished_at for c in cycles) - sent_at).total_seconds(), cycles


def _describe(cycles: list) -> str:
    return ", ".join(
        f"{c.kind} {c.instance_count} probed in {c.chunks_done}/{c.chunk_count} chunks"
        + (f" ({c.chunks_failed} failed)" if c.chunks_failed else "")
        for c in sorted(cycles, key=lambda c: c.kind)
    )


def measure(*, instances: int, base_port: int, workers: list[int], repeat: int) -> int:
    import django

    django.setup()
    from django.conf import settings

    from benchmarks.probe_cycle import _inventory, _start_simulator

    where = _prepare_database()
    broker = settings.CELERY_BROKER_URL.split("://")[0]
    print(
        f"fan-out benchmark: {instances} simulated instances, sweeps of {' + '.join(KINDS)} in chunks of "
        f"{settings.PROBE_CHUNK_SIZE}; database {where}, broker {broker}; os.cpu_count() = {os.cpu_count()}"
    )
    print("  (the simulator shares these cores with the workers: expect little gain past the core count)")
    simulator = _start_simulator(instances=instances, base_port=base_port)
    walls: dict[int, float] = {}
    try:
        _inventory(instances=instances, base_port=base_port)
        with tempfile.TemporaryDirectory(prefix="ops-fanout-logs-") as logs:
            for count in workers:
                started = _start_workers(count, Path(logs))
                try:
                    _sweep()  # untimed: the workers' first connections, the states made
                    timed = [_sweep() for _ in range(repeat)]
                finally:
                    _stop(started)
                walls[count] = min(wall for wall, _ in timed)
                print(
                    f"  {count} worker process{'es' if count > 1 else ''}: {walls[count]:.2f} s (best of "
                    f"{repeat}: {', '.join(f'{w:.2f}' for w, _ in timed)}); {_describe(timed[-1][1])}"
                )
        first = workers[0]
        if len(walls) > 1:
            print(
                f"  speedup over {first} worker process{'es' if first > 1 else ''}: "
                + ", ".join(f"{count}: x{walls[first] / wall:.2f}" for count, wall in walls.items())
            )
    finally:
        services.stop(simulator)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", type=int, default=4000)
    parser.add_argument("--base-port", type=int, default=27000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeat", type=int, default=2, help="timed sweeps per worker count")
    parser.add_argument("--chunk-size", type=int, default=None, help="default: PROBE_CHUNK_SIZE")
    parser.add_argument(
        "--database-url", default=os.environ.get("BENCH_FANOUT_DATABASE_URL", DEFAULT_DATABASE)
    )
    parser.add_argument("--broker-url", default=os.environ.get("BENCH_FANOUT_BROKER_URL", DEFAULT_BROKER))
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        return measure(
            instances=args.instances, base_port=args.base_port, workers=args.workers, repeat=args.repeat
        )
    return run(
        instances=args.instances,
        base_port=args.base_port,
        workers=tuple(args.workers),
        repeat=args.repeat,
        chunk_size=args.chunk_size,
        database_url=args.database_url,
        broker_url=args.broker_url,
    )


if __name__ == "__main__":
    sys.exit(main())
