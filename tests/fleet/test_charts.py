"""The instance page's charts: fractions drawn as percent, lines broken where samples are
missing, titles and axis labels with units; a long range in at most MAX_POINTS points a
trace, each bucket's lowest and highest value, so a single-sample spike still shows."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from core import figures
from fleet import chart_lines, chart_series, charts
from fleet.models import MetricSample
from fleet.retention import downsample_and_prune
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
    now = timezone.now().timestamp()
    points = [(now - s, 1.0) for s in (120, 90, 55, 30, 0)]  # one a little late
    assert chart_lines.with_gaps(points, every_s=30) == points


def test_it_reads_a_slower_schedule_from_the_samples_themselves():
    now = timezone.now().timestamp()
    every_two_minutes = [(now - 60 * m, 1.0) for m in (10, 8, 6, 4, 2)]
    assert chart_lines.sampling_interval_s(every_two_minutes, default_s=30) == 120
    assert chart_lines.with_gaps(every_two_minutes, every_s=120) == every_two_minutes
    assert chart_lines.sampling_interval_s(every_two_minutes[:1], default_s=30) == 30


def test_it_expects_the_retentions_five_minute_averages_five_minutes_apart():
    now = timezone.now().timestamp()
    old = [(now - 30 * 3600 - 60 * m, 1.0) for m in (20, 15, 10, 5)]
    assert chart_lines.with_gaps(old, every_s=30, coarse_before=now - 24 * 3600) == old
    assert None in [v for _, v in chart_lines.with_gaps(old, every_s=30)]


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
    assert '"title":{"text":"temperature (°C)"}' in page  # the figure's compact JSON


# A long range is drawn from buckets of each series' lowest and highest values ------------


def probe_week(instance, name: str, *, now, spikes: dict[int, float], base: float = 60.0) -> None:
    """A week of one series every 30 s, as the probes store it, with single-sample spikes
    (`seconds ago`: value); then the retention runs, as it does every few minutes."""
    spike_at = {now - timedelta(seconds=s): v for s, v in spikes.items()}
    start = now - timedelta(days=7)
    stamps = [start + timedelta(seconds=30 * n) for n in range(7 * 2880)]
    for ts in spike_at:
        stamps[min(range(len(stamps)), key=lambda i, ts=ts: abs(stamps[i] - ts))] = ts
    MetricSample.objects.bulk_create(
        [MetricSample(instance=instance, name=name, ts=ts, value=spike_at.get(ts, base)) for ts in stamps],
        batch_size=5000,
    )
    downsample_and_prune(now=now)


def charts_at(client, instance, chosen: str) -> list[dict]:
    response = client.get(reverse("fleet:instance-charts", args=[instance.pk]), {"range": chosen})
    assert response.status_code == 200
    return response.context["panels"]


def test_a_single_sample_spike_in_a_week_still_shows_in_the_7d_chart(viewer_client):
    instance = make_instance(make_host())
    now = timezone.now()
    probe_week(instance, "gpu_temperature_c", now=now, spikes={3 * 86400: 95.0, 2 * 3600: 99.0})
    averaged_spike = MetricSample.objects.filter(instance=instance, resolution__gt=0).order_by("-value")[0]
    assert 60.0 < averaged_spike.value < 95.0  # the retention keeps 5-minute averages of old samples

    (trace,) = panel(charts_at(viewer_client, instance, "7d"), "GPU temperature")["data"]
    assert 99.0 in trace["y"]  # a raw sample of the last day, in its hour's bucket
    assert averaged_spike.value in trace["y"]  # the week-old one, as the retention left it
    assert min(v for v in trace["y"] if v is not None) == 60.0


def test_no_trace_carries_more_points_than_a_chart_can_show(viewer_client):
    instance = make_instance(make_host())
    now = timezone.now()
    probe_week(instance, "num_requests_running", now=now, spikes={})
    store(instance, "num_requests_waiting", [(s, 1.0) for s in range(3600)])  # every second
    for chosen in ("1h", "6h", "24h", "7d"):
        for shown in charts_at(viewer_client, instance, chosen):
            for trace in shown["figure"]["data"]:
                assert len(trace["y"]) <= chart_series.MAX_POINTS, (chosen, trace["name"])
                assert len(trace.get("x", trace["y"])) == len(trace["y"])


def test_a_week_chart_breaks_its_line_where_the_instance_was_down_for_hours():
    instance = make_instance(make_host())
    now = timezone.now()
    every_30s = [(s, 0.5) for s in range(0, 7 * 86400, 30) if not 2 * 86400 < s < 2 * 86400 + 6 * 3600]
    store(instance, "kv_cache_usage", every_30s)
    figure = panel(charts.instance_panels(instance=instance, since=now - timedelta(days=7)), "KV cache usage")
    (trace,) = figure["data"]
    values = trace["y"]
    assert values.count(None) == 2 * 5  # the 5 whole hours of the 6 empty: no lowest, no highest
    assert set(values) == {50.0, None} and trace["connectgaps"] is False
    assert trace["dx"] == 3600 * 1000 // 2  # two points an hour bucket, in milliseconds


def test_a_slowed_schedule_does_not_break_the_24h_line_into_pieces():
    instance = make_instance(make_host())
    store(instance, "gpu_temperature_c", [(s, 70.0) for s in range(0, 86400, 600)])  # every 10 minutes
    figure = panel(
        charts.instance_panels(instance=instance, since=timezone.now() - timedelta(hours=24)),
        "GPU temperature",
    )
    (trace,) = figure["data"]
    assert None not in trace["y"] and set(trace["y"]) == {70.0}


def test_a_polled_week_chart_shows_the_newest_sample(viewer_client):
    instance = make_instance(make_host())
    store(instance, "probe_total_s", [(s, 0.2) for s in range(60, 7 * 86400, 300)])
    assert 4.0 not in panel(charts_at(viewer_client, instance, "7d"), "Probe latency")["data"][0]["y"]
    store(instance, "probe_total_s", [(0, 4.0)])  # the next probe, after the chart was drawn
    assert 4.0 in panel(charts_at(viewer_client, instance, "7d"), "Probe latency")["data"][0]["y"]


def test_the_charts_are_plain_figures_on_the_consoles_template():
    instance = make_instance(make_host())
    store(instance, "ttft_p95_s", [(60, 1.0), (30, 2.0)])
    (shown,) = charts.instance_panels(instance=instance, since=timezone.now() - timedelta(hours=1))
    layout = shown["figure"]["layout"]
    assert layout["template"] is figures.TEMPLATE and layout["hovermode"] == "x unified"
    (trace,) = shown["figure"]["data"]
    assert trace == trace | {"type": "scatter", "name": "p95", "mode": "lines+markers"}
    assert json.loads(json.dumps(shown["figure"])) == shown["figure"]  # nothing but JSON


# The page: compact JSON, and a poll that reads only what is new -------------------------


def embedded_figures(client, instance, chosen: str = "1h") -> dict[str, dict]:
    """The figures the charts partial embeds, by their script element's id."""
    response = client.get(reverse("fleet:instance-charts", args=[instance.pk]), {"range": chosen})
    page = response.content.decode()
    found = {}
    for script in page.split('<script id="')[1:]:
        figure_id, rest = script.split('" type="application/json">', 1)
        found[figure_id] = json.loads(rest.split("</script>", 1)[0])
    return found


def test_the_page_embeds_each_figure_as_compact_json_to_four_significant_digits(viewer_client):
    instance = make_instance(make_host())
    store(instance, "ttft_p95_s", [(60, 0.123456789), (30, 12345.678)])
    page = viewer_client.get(reverse("fleet:instance-charts", args=[instance.pk])).content.decode()
    assert ", " not in page.split('application/json">', 1)[1].split("</script>")[0]  # no spaces
    figure = embedded_figures(viewer_client, instance)["panel-0-figure"]
    (trace,) = figure["data"]
    assert trace["y"] == [0.1235, 12350.0]
    assert figure["layout"]["xaxis"]["type"] == "date"
    assert all(isinstance(x, int) for x in trace["x"])  # local wall-clock milliseconds
    assert trace["x"][1] - trace["x"][0] == 30_000
    assert figure["layout"]["template"] == json.loads(json.dumps(figures.TEMPLATE))


def test_a_polled_hour_chart_shows_new_samples_and_breaks_where_some_are_missing(viewer_client):
    instance = make_instance(make_host())
    store(instance, "probe_total_s", [(s, 0.2) for s in range(3600 - 30, 900, -30)])  # until 15 min ago
    store(instance, "probe_total_s", [(s, 0.3) for s in (240, 210, 180)])
    (first,) = embedded_figures(viewer_client, instance)["panel-12-figure"]["data"]
    assert first["y"][-4:] == [None, 0.3, 0.3, 0.3] and first["y"].count(None) == 1
    store(instance, "probe_total_s", [(0, 4.0)])  # the next probe, 2 minutes after the last one
    (polled,) = embedded_figures(viewer_client, instance)["panel-12-figure"]["data"]
    assert polled["y"][-3:] == [0.3, None, 4.0]  # a break: three intervals without a sample
    assert polled["y"][: len(first["y"]) - 1] == first["y"][:-1]
    assert len(polled["x"]) == len(polled["y"])


def test_the_settled_samples_a_chart_keeps_are_dropped_as_the_hour_moves_on(viewer_client):
    instance = make_instance(make_host())
    now = timezone.now()
    store(instance, "gpu_temperature_c", [(s, 60.0 + s / 3600) for s in range(3570, 0, -30)])
    early = charts.instance_panels(instance=instance, since=now - timedelta(hours=1))
    later = charts.instance_panels(instance=instance, since=now - timedelta(minutes=30))
    (early_trace,) = panel(early, "GPU temperature")["data"]
    (later_trace,) = panel(later, "GPU temperature")["data"]
    assert len(later_trace["y"]) < len(early_trace["y"])
    assert max(later_trace["y"]) <= 60.0 + 1800 / 3600


def test_a_kept_chart_extended_minute_by_minute_draws_what_a_full_read_draws():
    """As time passes the kept settled part grows by the minutes the settled line passed; at
    every step the lines equal a read of everything at that moment, breaks included."""
    from datetime import UTC, datetime

    instance = make_instance(make_host())
    start = datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC)  # the 1 h range's key holds for 10 minutes
    missing = (start - timedelta(minutes=14), start - timedelta(minutes=9))  # crosses the settled line

    def probe(since, until) -> None:
        stamps = []
        ts = since
        while ts < until:
            if not missing[0] <= ts < missing[1]:
                stamps.append(ts)
            ts += timedelta(seconds=30)
        MetricSample.objects.bulk_create(
            [MetricSample(instance=instance, name="probe_total_s", ts=t, value=t.minute / 10) for t in stamps]
        )

    probe(start - timedelta(days=2), start)
    downsample_and_prune(now=start)
    chart_lines.cache.entries.clear()
    ranges = {"1h": timedelta(hours=1), "7d": timedelta(days=7), "24h": timedelta(hours=24)}
    now = start
    for _minute in range(8):
        for chosen, span in ranges.items():
            kept = charts._lines(instance=instance, since=now - span, now=now, raw_hours=24)
            saved = dict(chart_lines.cache.entries)
            chart_lines.cache.entries.clear()
            full = charts._lines(instance=instance, since=now - span, now=now, raw_hours=24)
            chart_lines.cache.entries.clear()
            chart_lines.cache.entries.update(saved)
            assert kept == full, (chosen, now)
        hour = charts._lines(instance=instance, since=now - ranges["1h"], now=now, raw_hours=24)
        assert None in hour["probe_total_s"].y  # the missing minutes are a break
        (raw,) = [entry for key, (_at, entry) in chart_lines.cache.entries.items() if ":raw:" in key]
        assert raw.upto == chart_lines.settled_line_s(now)
        probe(now, now + timedelta(minutes=1))
        now += timedelta(minutes=1)
    # one 1 h range's kept part throughout: extended, never read in full again


def test_the_charts_of_an_instance_that_is_not_there_are_not_found(viewer_client):
    response = viewer_client.get(reverse("fleet:instance-charts", args=[987654]))
    assert response.status_code == 404
