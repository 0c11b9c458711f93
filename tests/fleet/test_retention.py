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
