"""`make bench`: the fleet overview at 1,000 and 10,000 instances, the instance charts and
the sizing chart against the login page, one worker's probe cycle over a simulated fleet of
1,000 instances against a bare fetch and against real Prometheus scraping the same targets,
the HTTP clients and parsers the prober could use, the sweep fanned out over 1, 2 and 4
worker processes, log triage of a generated 1 GB mixed log against grep, and the
Alertmanager receiver under load. The aims met or missed are printed side by side at the end.

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

from benchmarks import services

BENCHMARKS = ("overview", "charts", "probes", "clients", "fanout", "triage", "alerts")


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=BENCHMARKS, action="append", help="run this benchmark (repeatable)")
    parser.add_argument("--instances", type=int, default=1000, help="simulated instances of the probe cycle")
    parser.add_argument("--base-port", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--prometheus-interval", type=float, default=2.0, help="its scrape interval, seconds")
    parser.add_argument("--overview-sizes", type=_sizes, default=(1000, 10000), help="e.g. 1000,10000")
    parser.add_argument("--chart-days", type=int, default=7, help="days of samples behind the charts")
    parser.add_argument("--fanout-instances", type=int, default=4000)
    parser.add_argument(
        "--fanout-workers", type=_sizes, default=(1, 2, 4), help="worker processes, e.g. 1,2,4"
    )
    parser.add_argument("--fanout-base-port", type=int, default=27000)
    parser.add_argument(
        "--fanout-database-url",
        default=os.environ.get(
            "BENCH_FANOUT_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_fanout"
        ),
        help="the database the fan-out's workers share (PostgreSQL; unreachable: SQLite)",
    )
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
        help="the broker of the PostgreSQL runs ('' or unreachable: the filesystem broker)",
    )
    args = parser.parse_args(argv)
    chosen = set(args.only or BENCHMARKS)
    with tempfile.TemporaryDirectory(prefix="ops-bench-") as var_dir:
        services.setup_django(var_dir)
        from benchmarks import aims

        status = 0
        if "overview" in chosen:
            from benchmarks import overview

            status |= overview.run(sizes=args.overview_sizes)
        if "charts" in chosen:
            from benchmarks import charts

            status |= charts.run(days=args.chart_days)
        if "probes" in chosen:
            from benchmarks.probe_cycle import run

            status |= run(
                instances=args.instances,
                base_port=args.base_port,
                concurrency=args.concurrency,
                repeat=args.repeat,
                prometheus_interval_s=args.prometheus_interval,
            )
        if "clients" in chosen:
            from benchmarks import http_clients

            status |= http_clients.run(
                instances=args.instances, base_port=args.base_port, concurrency=args.concurrency, repeat=2
            )
        if "fanout" in chosen:
            from benchmarks import fanout

            status |= fanout.run(
                instances=args.fanout_instances,
                base_port=args.fanout_base_port,
                workers=args.fanout_workers,
                database_url=args.fanout_database_url,
                broker_url=args.redis_url,
            )
        if "triage" in chosen:
            from benchmarks import triage

            status |= triage.run(size_mb=args.triage_mb)
        if "alerts" in chosen:
            from benchmarks import alert_receiver

            status |= alert_receiver.run(
                payloads=args.alert_payloads,
                per_payload=args.alerts_per_payload,
                rounds=args.alert_rounds,
                big=args.big_payload,
                postgres_url=args.postgres_url,
                redis_url=args.redis_url,
            )
        print(aims.report())
        return 1 if status or any(not aim.met for aim in aims.noted()) else 0


if __name__ == "__main__":
    sys.exit(main())
