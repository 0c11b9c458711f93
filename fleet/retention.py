"""Keeping metric samples bounded: old raw samples become 5-minute averages, the oldest go."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Avg
from django.db.models.functions import ExtractMinute, Floor, TruncHour

from fleet.models import MetricSample, ProbeRun, ProbeSettings

BUCKET_SECONDS = 300
SLOTS_PER_HOUR_DIV = BUCKET_SECONDS // 60  # minute // 5: the 5-minute slot of the hour
PROBE_RUN_RETENTION = timedelta(days=7)


def downsample(*, before: datetime) -> int:
    """Replace raw samples older than `before` with one average per series and 5 minutes.

    The database averages (grouped by series, UTC hour and 5-minute slot of the hour), so
    a fleet's million raw samples an hour come back as a tenth as many rows."""
    raw = MetricSample.objects.filter(resolution=0, ts__lt=before)
    buckets = (
        raw.annotate(
            hour=TruncHour("ts", tzinfo=UTC),
            slot=Floor(ExtractMinute("ts", tzinfo=UTC) / SLOTS_PER_HOUR_DIV),
        )
        .values("instance_id", "name", "hour", "slot")
        .annotate(mean=Avg("value"))
        .order_by()
    )
    averaged = [
        MetricSample(
            instance_id=b["instance_id"],
            name=b["name"],
            ts=b["hour"] + timedelta(seconds=int(b["slot"]) * BUCKET_SECONDS),
            value=b["mean"],
            resolution=BUCKET_SECONDS,
        )
        for b in buckets.iterator()
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
