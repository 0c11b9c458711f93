"""Keeping metric samples bounded: old raw samples become 5-minute averages, the oldest go."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from fleet.models import MetricSample, ProbeRun, ProbeSettings

BUCKET_SECONDS = 300
PROBE_RUN_RETENTION = timedelta(days=7)


def _bucket_start(ts: datetime) -> datetime:
    epoch = int(ts.timestamp())
    return datetime.fromtimestamp(epoch - epoch % BUCKET_SECONDS, tz=ts.tzinfo)


def downsample(*, before: datetime) -> int:
    """Replace raw samples older than `before` with one average per series and 5 minutes."""
    raw = MetricSample.objects.filter(resolution=0, ts__lt=before)
    sums: dict[tuple[int, str, datetime], list[float]] = {}
    for instance_id, name, ts, value in raw.values_list("instance_id", "name", "ts", "value").iterator():
        sums.setdefault((instance_id, name, _bucket_start(ts)), []).append(value)
    averaged = [
        MetricSample(instance_id=i, name=n, ts=t, value=sum(v) / len(v), resolution=BUCKET_SECONDS)
        for (i, n, t), v in sums.items()
    ]
    with transaction.atomic():
        deleted, _ = raw.delete()
        MetricSample.objects.bulk_create(averaged, batch_size=2000)
    return deleted


def downsample_and_prune(*, now: datetime) -> dict[str, int]:
    settings = ProbeSettings.current()
    replaced = downsample(before=now - timedelta(hours=settings.raw_retention_hours))
    pruned, _ = MetricSample.objects.filter(
        ts__lt=now - timedelta(days=settings.sample_retention_days)
    ).delete()
    runs, _ = ProbeRun.objects.filter(started_at__lt=now - PROBE_RUN_RETENTION).delete()
    return {"downsampled": replaced, "pruned": pruned, "probe_runs_pruned": runs}
