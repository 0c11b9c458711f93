"""`make bench`: one worker's probe cycle over a simulated fleet of 1,000 instances, log
triage of a generated 1 GB mixed log against grep, and the Alertmanager receiver under load.

Prints instances per second, the cycle's wall time, peak memory, and the ratio of the
cycle (health + metrics scrape + parse + store) to a bare concurrent fetch of the same URLs;
then the triage's time, throughput and memory against `grep -E -c` with the same patterns;
then the receiver's answer latency (p50, p99) for payloads sent at once and the time one
payload of 1,000 alerts takes until a worker has processed it, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile


def _setup_django(var_dir: str) -> None:
    os.environ["OPS_VAR_DIR"] = var_dir
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ops_console.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--base-port", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("probes", "triage", "alerts"), help="run one benchmark")
    parser.add_argument("--triage-mb", type=int, default=1024, help="size of the generated log")
    parser.add_argument("--alert-payloads", type=int, default=50, help="payloads sent at once")
    parser.add_argument("--alerts-per-payload", type=int, default=20)
    parser.add_argument("--alert-rounds", type=int, default=3)
    parser.add_argument("--big-payload", type=int, default=1000, help="alerts in the one large payload")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench"),
        help="a PostgreSQL database the alerts benchmark may create and empty ('' skips it)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/13"),
        help="the broker for the PostgreSQL run ('' or unreachable: the filesystem broker)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ops-bench-") as var_dir:
        _setup_django(var_dir)
        status = 0
        if args.only in (None, "probes"):
            from benchmarks.probe_cycle import run

            status |= run(
                instances=args.instances,
                base_port=args.base_port,
                concurrency=args.concurrency,
                repeat=args.repeat,
            )
        if args.only in (None, "triage"):
            from benchmarks import triage

            status |= triage.run(size_mb=args.triage_mb)
        if args.only in (None, "alerts"):
            from benchmarks import alert_receiver

            status |= alert_receiver.run(
                payloads=args.alert_payloads,
                per_payload=args.alerts_per_payload,
                rounds=args.alert_rounds,
                big=args.big_payload,
                postgres_url=args.postgres_url,
                redis_url=args.redis_url,
            )
        return status


if __name__ == "__main__":
    sys.exit(main())
