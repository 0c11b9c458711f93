from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.models import MetricSample
from fleet.retention import downsample_and_prune
from tests.factories import make_host, make_instance

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def test_old_raw_samples_become_five_minute_averages_and_the_oldest_go():
    instance = make_instance(make_host())
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    old = now - timedelta(hours=30)
    MetricSample.objects.bulk_create(
        [
            MetricSample(
                instance=instance, name="kv_cache_usage", ts=old + timedelta(seconds=30 * i), value=v
            )
            for i, v in enumerate([0.2, 0.4, 0.6])
        ]
        + [
            MetricSample(instance=instance, name="kv_cache_usage", ts=now - timedelta(days=40), value=1.0),
            MetricSample(instance=instance, name="kv_cache_usage", ts=now - timedelta(minutes=1), value=0.9),
        ]
    )
    result = downsample_and_prune(now=now)
    kept = list(MetricSample.objects.order_by("ts").values_list("resolution", "value"))
    assert kept == [(300, pytest.approx(0.4)), (0, 0.9)]
    assert result["downsampled"] == 4 and result["pruned"] == 1


def test_each_series_gets_one_average_per_five_minutes_of_the_hour():
    first, second = make_instance(make_host(name="a")), make_instance(make_host(name="b"))
    hour = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=30)
    raw = [
        (first, "kv_cache_usage", 1, 0.1),
        (first, "kv_cache_usage", 4, 0.3),  # same slot as minute 1
        (first, "kv_cache_usage", 7, 0.8),  # the next slot
        (first, "num_requests_waiting", 2, 12.0),
        (second, "kv_cache_usage", 3, 0.5),
        (first, "kv_cache_usage", 62, 0.9),  # minute 2 of the next hour
    ]
    MetricSample.objects.bulk_create(
        [MetricSample(instance=i, name=n, ts=hour + timedelta(minutes=m), value=v) for i, n, m, v in raw]
    )
    downsample_and_prune(now=hour + timedelta(hours=30))
    kept = sorted(
        (s.instance.host.name, s.name, int((s.ts - hour).total_seconds() // 60), round(s.value, 6))
        for s in MetricSample.objects.select_related("instance__host")
    )
    assert kept == [
        ("a", "kv_cache_usage", 0, 0.2),
        ("a", "kv_cache_usage", 5, 0.8),
        ("a", "kv_cache_usage", 60, 0.9),
        ("a", "num_requests_waiting", 0, 12.0),
        ("b", "kv_cache_usage", 0, 0.5),
    ]
    assert set(MetricSample.objects.values_list("resolution", flat=True)) == {300}
