"""The instance page's charts: fractions drawn as percent, lines broken where samples are
missing, titles and axis labels with units."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet import charts
from fleet.models import MetricSample
from tests.factories import make_host, make_instance

pytestmark = pytest.mark.django_db


def store(instance, name: str, points: list[tuple[int, float]]) -> None:
    """Samples of one series, `seconds ago` and value each."""
    now = timezone.now()
    MetricSample.objects.bulk_create(
        [
            MetricSample(instance=instance, name=name, ts=now - timedelta(seconds=s), value=v)
            for s, v in points
        ]
    )


def panel(panels: list[dict], title: str) -> dict:
    (found,) = [p for p in panels if str(p["title"]) == title]
    return found["figure"]


def test_it_plots_the_kv_cache_as_percent_on_a_0_to_100_axis():
    instance = make_instance(make_host())
    store(instance, "kv_cache_usage", [(90, 0.42), (60, 0.5), (30, 0.875)])
    figure = panel(
        charts.instance_panels(instance=instance, since=timezone.now() - timedelta(hours=1)), "KV cache usage"
    )
    assert figure["data"][0]["y"] == [42.0, 50.0, 87.5]
    assert figure["layout"]["yaxis"]["range"] == [0, 100]
    assert figure["layout"]["yaxis"]["title"]["text"] == "KV cache used (%)"


def test_it_breaks_the_probe_latency_line_where_samples_are_missing():
    instance = make_instance(make_host())
    # every 30 s, then nothing for 5 minutes, then every 30 s again
    store(instance, "probe_total_s", [(600, 0.2), (570, 0.21), (540, 0.22), (240, 0.3), (210, 0.31)])
    figure = panel(
        charts.instance_panels(instance=instance, since=timezone.now() - timedelta(hours=1)),
        "Probe latency",
    )
    (trace,) = figure["data"]
    assert trace["y"] == [0.2, 0.21, 0.22, None, 0.3, 0.31]
    assert trace["connectgaps"] is False
    assert figure["layout"]["yaxis"]["title"]["text"] == "seconds (s)"
    assert figure["layout"]["xaxis"]["title"]["text"] == "time (UTC)"


def test_it_keeps_the_line_whole_when_samples_come_about_every_interval():
    now = timezone.now()
    points = [(now - timedelta(seconds=s), 1.0) for s in (120, 90, 55, 30, 0)]  # one a little late
    assert charts.with_gaps(points, every_s=30) == points


def test_it_reads_a_slower_schedule_from_the_samples_themselves():
    now = timezone.now()
    every_two_minutes = [(now - timedelta(minutes=m), 1.0) for m in (10, 8, 6, 4, 2)]
    assert charts.sampling_interval_s(every_two_minutes, default_s=30) == 120
    assert charts.with_gaps(every_two_minutes, every_s=120) == every_two_minutes
    assert charts.sampling_interval_s(every_two_minutes[:1], default_s=30) == 30


def test_it_expects_the_retentions_five_minute_averages_five_minutes_apart():
    now = timezone.now()
    old = [(now - timedelta(hours=30, minutes=m), 1.0) for m in (20, 15, 10, 5)]
    assert charts.with_gaps(old, every_s=30, coarse_before=now - timedelta(hours=24)) == old
    assert None in [v for _, v in charts.with_gaps(old, every_s=30)]


def test_it_draws_shares_of_requests_as_percent_from_zero():
    instance = make_instance(make_host())
    store(instance, "error_rate", [(60, 0.02), (30, 0.05)])
    figure = panel(
        charts.instance_panels(instance=instance, since=timezone.now() - timedelta(hours=1)), "Errors"
    )
    assert figure["data"][0]["y"] == [2.0, 5.0]
    assert figure["layout"]["yaxis"]["rangemode"] == "tozero"
    assert "(%)" in figure["layout"]["yaxis"]["title"]["text"]


def test_every_chart_names_its_unit_on_the_y_axis(viewer_client):
    instance = make_instance(make_host())
    for name in ("ttft_p95_s", "num_requests_waiting", "gpu_temperature_c", "generation_tokens_per_s"):
        store(instance, name, [(60, 1.0), (30, 2.0)])
    panels = charts.instance_panels(instance=instance, since=timezone.now() - timedelta(hours=1))
    axes = {str(p["title"]): p["figure"]["layout"]["yaxis"]["title"]["text"] for p in panels}
    assert axes == {
        "Time to first token": "seconds (s)",
        "Requests": "requests",
        "GPU temperature": "temperature (°C)",
        "Tokens per second": "tokens/s",
    }
    page = viewer_client.get(reverse("fleet:instance-charts", args=[instance.pk])).content.decode()
    assert "temperature (\\u00b0C)" in page  # the figure's JSON, escaped by json_script
