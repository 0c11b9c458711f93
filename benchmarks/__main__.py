"""`make bench`: one worker's probe cycle over a simulated fleet of 1,000 instances, and log
triage of a generated 1 GB mixed log against grep.

Prints instances per second, the cycle's wall time, peak memory, and the ratio of the
cycle (health + metrics scrape + parse + store) to a bare concurrent fetch of the same URLs;
then the triage's time, throughput and memory against `grep -E -c` with the same patterns.
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
    parser.add_argument("--only", choices=("probes", "triage"), help="run one benchmark")
    parser.add_argument("--triage-mb", type=int, default=1024, help="size of the generated log")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ops-bench-") as var_dir:
        _setup_django(var_dir)
        status = 0
        if args.only != "triage":
            from benchmarks.probe_cycle import run

            status |= run(
                instances=args.instances,
                base_port=args.base_port,
                concurrency=args.concurrency,
                repeat=args.repeat,
            )
        if args.only != "probes":
            from benchmarks import triage

            status |= triage.run(size_mb=args.triage_mb)
        return status


if __name__ == "__main__":
    sys.exit(main())
