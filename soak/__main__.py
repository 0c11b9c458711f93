"""`make soak`: the whole console under steady load for a bounded time, then checked.

    python -m soak                      # SOAK_SECONDS of load (default 600), 200 instances
    SOAK_SECONDS=120 python -m soak --instances 50

In a fresh temporary OPS_VAR_DIR on the embedded default (SQLite, the filesystem broker),
as `make run` would: migrate, bootstrap, an inventory of N simulated instances imported
with `manage.py fleet import`, then `manage.py console` (web, worker, beat and the
simulator, from the Procfile). Faults cycle through the fleet, Alertmanager payloads
arrive at a steady rate, and each process's memory is sampled. Then the load stops, the
worker drains, the console stops, and the checks run: memory flat, no lost alert, no
stuck probe cycle, no unhandled exception in the logs, every process up through the run
and stopped cleanly (docs/soak.md). Exit status 0 when
every check passes, 1 when one fails, 2 when the soak could not run.
"""

from __future__ import annotations

import argparse
import io
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from soak import log_scan, memory, probe_cycles, stored_alerts
from soak.alert_load import AlertLoad
from soak.fault_driver import FaultDriver
from soak.inventory import free_port, free_port_block, instance_names, inventory_text
from soak.processes import ROLES, Console, roles_of, start_console, stop_console, wait_until_up
from soak.report import Outcome, render

START_TIMEOUT_S = 240
PROGRESS_EVERY_S = 30


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=float(env("SOAK_SECONDS", "600")), help="of load")
    parser.add_argument("--instances", type=int, default=int(env("SOAK_INSTANCES", "200")))
    parser.add_argument("--alert-rate", type=float, default=5.0, help="payloads a second")
    parser.add_argument("--alert-groups", type=int, default=10, help="notification groups (one sender each)")
    parser.add_argument("--alerts-per-group", type=int, default=100)
    parser.add_argument("--fault-every", type=float, default=3.0, help="seconds between new faults")
    parser.add_argument(
        "--faulted-share", type=float, default=0.1, help="of the fleet faulted at most at once"
    )
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between memory samples")
    parser.add_argument(
        "--warmup", type=float, default=None, help="seconds (default: a quarter, at most 120)"
    )
    parser.add_argument("--drain", type=float, default=300.0, help="seconds the worker may take to catch up")
    parser.add_argument("--seed", type=int, default=int(env("SOAK_SEED", "0")) or None)
    parser.add_argument(
        "--keep", action="store_true", default=bool(env("SOAK_KEEP")), help="keep the var dir"
    )
    return parser.parse_args(argv)


def _environment(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "SIMULATOR_"))}
    for name in ("DATABASE_URL", "DEBUG", "PRODUCTION", "SECRET_KEY", "LOG_LEVEL"):
        env.pop(name, None)
    env.setdefault("DJANGO_SETTINGS_MODULE", "ops_console.settings")
    env |= {
        "OPS_VAR_DIR": str(var_dir),
        "DATABASE_URL": f"sqlite:///{var_dir / 'console.sqlite3'}",
        "ALERTMANAGER_TOKEN": secrets.token_urlsafe(24),
        "ADMIN_PASSWORD": secrets.token_urlsafe(16),
        "PORT": str(free_port()),
        "SIM_CONTROL_PORT": str(free_port()),
        "PYTHONUNBUFFERED": "1",
    }
    return env


def _prepare(env: dict[str, str], *, instances: int, var_dir: Path) -> list[str]:
    """migrate, bootstrap and the inventory, in this process (which then reads the results)."""
    os.environ.clear()
    os.environ.update(env)
    import django
    from django.core.management import call_command
    from django.db import connections

    django.setup()
    quiet = io.StringIO()
    call_command("migrate", "--noinput", verbosity=0)
    call_command("bootstrap", stdout=quiet)
    path = var_dir / "soak-inventory.yaml"
    path.write_text(inventory_text(count=instances, base_port=free_port_block(instances)))
    call_command("fleet", "import", str(path), "--format", "yaml", stdout=quiet)
    connections.close_all()
    return instance_names(instances)


class Sampler(threading.Thread):
    """Memory of each Procfile process every `every_s`, and which of them were missing."""

    def __init__(self, console: Console, every_s: float) -> None:
        super().__init__(name="soak-memory", daemon=True)
        self.console, self.every_s = console, every_s
        self.log = memory.MemoryLog()
        self.missing = dict.fromkeys(ROLES, 0)
        self._stopping = threading.Event()

    def run(self) -> None:
        while True:
            roles = roles_of(self.console.pid)
            for role in ROLES:
                self.missing[role] += role not in roles
            self.log.take(roles)
            if self._stopping.wait(self.every_s):
                return

    def stop(self) -> None:
        self._stopping.set()
        self.join()


def _progress(started: float, sampler: Sampler, load: AlertLoad, faults: FaultDriver) -> str:
    latest = {role: samples[-1].rss_kib / 1024 for role, samples in sampler.log.samples.items() if samples}
    rss = ", ".join(f"{role} {mib:.0f}" for role, mib in latest.items())
    return (
        f"  {time.monotonic() - started:5.0f} s: payloads accepted {load.ledger.accepted}, refused "
        f"{len(load.ledger.refused)}; faults injected {sum(faults.stats.injected.values())}; RSS MiB: {rss}"
    )


@dataclass(frozen=True)
class Ran:
    since: datetime
    seconds: float
    sampler: Sampler
    load: AlertLoad
    faults: FaultDriver


def _load(args: argparse.Namespace, console: Console, env: dict[str, str], names: list[str]) -> Ran:
    base_url = f"http://127.0.0.1:{env['PORT']}"
    control_url = f"http://127.0.0.1:{env['SIM_CONTROL_PORT']}"
    seed = args.seed if args.seed is not None else secrets.randbelow(10**6)
    print(f"load: {args.seconds:.0f} s, {args.alert_rate:g} payloads/s, a fault every {args.fault_every:g} s "
          f"(seed {seed})", flush=True)  # fmt: skip
    since = datetime.now(UTC)
    sampler = Sampler(console, args.sample_every)
    faults = FaultDriver(
        control_url=control_url,
        names=names,
        every_s=args.fault_every,
        max_faulted=int(len(names) * args.faulted_share),
        seed=seed,
    )
    load = AlertLoad(
        base_url=base_url,
        token=env["ALERTMANAGER_TOKEN"],
        rate=args.alert_rate,
        groups=args.alert_groups,
        alerts_per_group=args.alerts_per_group,
        instance_names=names,
        seed=seed,
    )
    started = time.monotonic()
    sampler.start()
    faults.start()
    load.start()
    while (left := args.seconds - (time.monotonic() - started)) > 0:
        time.sleep(min(PROGRESS_EVERY_S, left))
        print(_progress(started, sampler, load, faults), flush=True)
    load.stop()
    faults.stop()
    faults.join(timeout=60)
    sampler.stop()
    return Ran(since=since, seconds=time.monotonic() - started, sampler=sampler, load=load, faults=faults)


def _queued(var_dir: Path) -> tuple[int, float]:
    """Tasks waiting in the embedded filesystem broker (one file each, named by the
    system's monotonic clock in milliseconds when it was sent), and the oldest one's age."""
    sent_ms = [int(path.name.split("_", 1)[0]) for path in (var_dir / "broker").glob("*.msg")]
    oldest = time.monotonic() - min(sent_ms) / 1000 if sent_ms else 0.0
    return len(sent_ms), oldest


def run(args: argparse.Namespace, var_dir: Path) -> Outcome:
    env = _environment(var_dir)
    print(f"soak: {args.instances} instances in {var_dir} (web on {env['PORT']})", flush=True)
    names = _prepare(env, instances=args.instances, var_dir=var_dir)
    console = start_console(env=env, port=int(env["PORT"]), log_path=var_dir / "console.log")
    try:
        urls = [
            f"http://127.0.0.1:{env['PORT']}/healthz",
            f"http://127.0.0.1:{env['SIM_CONTROL_PORT']}/_sim/instances",
        ]
        wait_until_up(console, urls=urls, timeout_s=START_TIMEOUT_S)
        print("console up", flush=True)
        ran = _load(args, console, env, names)
        queued = [_queued(var_dir)]
        print(f"load stopped; draining ({queued[0][0]} tasks waiting in the broker)", flush=True)
        tally, drained = stored_alerts.drain(ran.load.ledger.last_status, timeout_s=args.drain)
        cycles = probe_cycles.check(since=ran.since)
        queued.append(_queued(var_dir))
    finally:
        stopped = stop_console(console)
    with console.log_path.open(encoding="utf-8", errors="replace") as log:
        findings, allowed = log_scan.scan(log)
    warmup = args.warmup if args.warmup is not None else min(120.0, args.seconds / 4)
    sampler = ran.sampler
    allowances = {"sim": memory.simulator_allowance_mib(args.instances)}
    verdicts = [
        memory.judge(
            sampler.log.samples.get(role, []),
            role=role,
            warmup_s=warmup,
            allowance_mib=allowances.get(role, 0.0),
        )
        for role in ROLES
    ]
    return Outcome(
        seconds=ran.seconds,
        instances=args.instances,
        memory=[v for v in verdicts if v is not None],
        roles_missing=sampler.missing,
        ledger=ran.load.ledger,
        faults=ran.faults.stats,
        alerts=tally,
        drain_s=drained,
        cycles=cycles,
        stopped=stopped,
        queued=queued,
        findings=findings,
        allowed=allowed,
    )


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    var_dir = Path(tempfile.mkdtemp(prefix="ops-soak-"))
    passed = False
    try:
        outcome = run(args, var_dir)
        print(render(outcome), flush=True)
        passed = outcome.passed
        return 0 if passed else 1
    except (RuntimeError, OSError) as exc:
        print(f"soak could not run: {exc}", file=sys.stderr)
        return 2
    finally:
        if passed and not args.keep:
            shutil.rmtree(var_dir, ignore_errors=True)
        else:
            print(f"the soak's files (console.log, console.sqlite3) are in {var_dir}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
