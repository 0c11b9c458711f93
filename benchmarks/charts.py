"""The chart pages against the login page: the instance page's charts partial at 1h, 24h and
7d for an instance with a week of samples, and the sizing page with its concurrency chart,
whole and as the results partial its form fetches over HTMX (the figures and the chart).

The week is stored as the probes store it (raw samples of every declared series at its
probe kind's interval, resolution 0), then the project's own retention runs
(fleet.retention.downsample_and_prune), so the rows are what a week-old instance has: the
last raw_retention_hours raw, the rest 5-minute averages. Aim: each page within 5x the
login page's render, measured in the same run.

    python -m benchmarks.charts                      # embedded SQLite, as `make bench`
    python -m benchmarks.charts --database-url postgres://postgres@127.0.0.1:5432/bench
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta

from benchmarks import services

AIM = 5.0  # at most this many login renders
INSTANCE_NAME = "bench-charts"
SIZING_QUERY = "model=llama-3.1-70b-instruct&gpu=h100-80gb&gpus=4&tensor_parallel_size=4"
RANGES = ("1h", "24h", "7d")


def _interval_s(kind: str) -> int:
    from fleet.probe_service import DEFAULT_INTERVALS_S, HOST_CHECKS_INTERVAL_S

    return int(DEFAULT_INTERVALS_S.get(kind, HOST_CHECKS_INTERVAL_S))


def _value(index: int, t: float) -> float:
    """A plausible wavy value per series: a daily cycle and a faster wobble."""
    day = math.sin(2 * math.pi * t / 86400 + index)
    wobble = math.sin(2 * math.pi * t / 900 + 3 * index)
    return round(abs(1.0 + 0.5 * day + 0.1 * wobble) * (1 + index % 5), 4)


def _raw_samples(instance_id: int, *, now: datetime, days: int) -> list:
    """Every declared series at its probe kind's interval over `days`, as the probes store them."""
    from fleet.models import MetricSample
    from fleet.series import SERIES

    start = now - timedelta(days=days)
    rows = []
    for index, series in enumerate(SERIES):
        every = _interval_s(str(series.kind))
        for n in range(0, days * 86400 // every):
            rows.append(
                MetricSample(
                    instance_id=instance_id,
                    name=series.name,
                    ts=start + timedelta(seconds=n * every),
                    value=_value(index, n * every),
                    resolution=0,
                )
            )
    rows.sort(key=lambda row: row.ts)  # a probe stores all its series at once, in time order
    return rows


def _week_old_instance(*, days: int) -> tuple[int, int]:
    """An instance with `days` of samples after retention: (its id, its stored rows)."""
    from django.db import connection, transaction
    from django.utils import timezone

    from fleet.models import GpuHost, Instance, InstanceState, MetricSample
    from fleet.retention import downsample_and_prune

    Instance.objects.filter(name=INSTANCE_NAME).delete()
    host, _ = GpuHost.objects.get_or_create(name="bench-charts-host", defaults={"address": "127.0.0.1"})
    instance = Instance.objects.create(
        host=host, name=INSTANCE_NAME, base_url="http://127.0.0.1:1", served_model_name="bench"
    )
    now = timezone.now()
    phases = {"dns_s": 0.001, "connect_s": 0.002, "tls_s": 0.004, "ttfb_s": 0.05, "total_s": 0.06}
    InstanceState.objects.create(
        instance=instance, kinds={"health": {"at": now.isoformat(), "result": {"phases": phases}}}
    )
    with transaction.atomic():
        MetricSample.objects.bulk_create(_raw_samples(instance.pk, now=now, days=days), batch_size=5000)
    downsample_and_prune(now=now)
    if connection.vendor == "postgresql":  # as autovacuum would have, after a week of inserts
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {MetricSample._meta.db_table}")
    return instance.pk, MetricSample.objects.filter(instance_id=instance.pk).count()


def _print(label: str, timing, login, *, aim: bool = True) -> None:  # noqa: ANN001
    ratio = timing.ratio_to(login)
    verdict = ("ok" if ratio <= AIM else f"over {AIM:g}x") if aim else "(no aim: the form around the chart)"
    print(
        f"  {label:<24} {timing.queries:>4} queries {timing.median_ms:>9.1f} ms "
        f"{timing.size_bytes / 1024:>9.1f} KiB {ratio:>7.1f}x login  {verdict}"
    )


def run(*, days: int = 7, repeat: int = 15) -> int:
    """Time the pages; 1 when one of them takes more than AIM login renders."""
    from django.urls import reverse

    from benchmarks import aims
    from benchmarks.page_timing import login_page, signed_in_client, time_page

    started = time.perf_counter()
    instance_id, rows = _week_old_instance(days=days)
    print(f"Chart pages, an instance with {days} days of samples ({rows:,} rows after retention, ", end="")
    print(f"seeded in {time.perf_counter() - started:.1f} s); median of {repeat} requests:")
    client = signed_in_client()
    login = login_page(repeat=repeat)
    print(
        f"  {'login page':<24} {login.queries:>4} queries {login.median_ms:>9.1f} ms "
        f"{login.size_bytes / 1024:>9.1f} KiB"
    )
    pages: dict[str, str | tuple[str, dict]] = {
        f"charts partial {r}": f"{reverse('fleet:instance-charts', args=[instance_id])}?range={r}"
        for r in RANGES
    }
    sizing = f"{reverse('diagnostics:sizing')}?{SIZING_QUERY}"
    pages["sizing page"] = sizing
    pages["sizing results partial"] = (sizing, {"HX-Request": "true", "HX-Target": "results"})
    over = 0
    for label, page in pages.items():
        url, headers = page if isinstance(page, tuple) else (page, None)
        timing = time_page(client, url, repeat=repeat, headers=headers)
        aimed = label != "sizing page"  # the form's page around the chart: printed, no aim
        _print(label, timing, login, aim=aimed)
        if aimed:
            over += not aims.note(f"{label} / login", timing.ratio_to(login), AIM).met
    print(f"  (load average {' '.join(f'{n:.2f}' for n in os.getloadavg())}: other work on the machine)")
    return 1 if over else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--database-url", default="", help="a database it may write to ('' : SQLite)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ops-bench-") as var_dir:
        services.setup_django(var_dir, args.database_url)
        return run(days=args.days, repeat=args.repeat)


if __name__ == "__main__":
    sys.exit(main())
