"""Review statistics against figures computed by hand on a fixed set of ten incidents, and the
filters shared by the review page, the CSV and the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from incidents import stats
from incidents.models import Incident
from incidents.stats import DurationStats, IncidentRecord, ReviewFilters, Share
from tests.factories import make_host, make_instance

T0 = datetime(2025, 3, 3, tzinfo=UTC)  # a Monday: ISO week 2025-W10
DETECTION_DELAY = timedelta(minutes=5)  # every incident is detected 5 minutes after it starts

# category, day after T0 (10:00), minutes detected -> acknowledged, minutes started -> resolved,
# status, instances. Families: 4 timeout, 3 oom, 2 rate_limit, 1 cuda (40/30/20/10 %).
FIXED_SET = [
    ("timeout.ttft", 1, 10, 60, "resolved", ("vllm-a",)),  # W10
    ("timeout.tps", 2, 20, 120, "resolved", ("vllm-a",)),  # W10
    ("timeout.connect", 8, 30, None, "mitigated", ("vllm-b",)),  # W11
    ("timeout.network", 9, None, None, "open", ("vllm-a",)),  # W11
    ("oom.gpu", 3, 5, 30, "resolved", ("vllm-b",)),  # W10
    ("oom.kv_pressure", 10, 7, 45, "resolved", ("vllm-a",)),  # W11
    ("oom.container", 15, 30, 300, "resolved", ("vllm-c",)),  # W12
    ("rate_limit.http_429", 4, 4, 16, "resolved", ("vllm-b",)),  # W10
    ("rate_limit.queue", 16, None, None, "open", ()),  # W12
    ("cuda.xid", 17, 60, 600, "resolved", ("vllm-c",)),  # W12
]
MODELS = {"vllm-a": "Qwen/Qwen3-8B", "vllm-b": "Qwen/Qwen3-8B", "vllm-c": "meta-llama/Llama-3.1-70B"}


def _times(day: int, tta: int | None, ttr: int | None) -> dict:
    started = T0 + timedelta(days=day, hours=10)
    detected = started + DETECTION_DELAY
    return {
        "started_at": started,
        "detected_at": detected,
        "acknowledged_at": detected + timedelta(minutes=tta) if tta is not None else None,
        "resolved_at": started + timedelta(minutes=ttr) if ttr is not None else None,
    }


def fixed_records() -> list[IncidentRecord]:
    return [
        IncidentRecord(id=n, category=category, status=status, instances=names, **_times(day, tta, ttr))
        for n, (category, day, tta, ttr, status, names) in enumerate(FIXED_SET, start=1)
    ]


def create_fixed_set() -> list[Incident]:
    """The fixed set as rows: vllm-a and vllm-b on gpu-node-a, vllm-c on gpu-node-c; the open
    rate-limit incident names no instance but records the model it hit."""
    host_a, host_c = make_host(name="gpu-node-a"), make_host(name="gpu-node-c")
    instances = {
        name: make_instance(host_c if name == "vllm-c" else host_a, name=name, served_model_name=model)
        for name, model in MODELS.items()
    }
    incidents = []
    for n, (category, day, tta, ttr, status, names) in enumerate(FIXED_SET, start=1):
        incident = Incident.objects.create(
            title=f"Incident {n}: {category}", category=category, status=status, **_times(day, tta, ttr)
        )
        incident.instances.set([instances[name] for name in names])
        if not names:
            incident.models_affected = ["mistralai/Mistral-7B"]
            incident.save()
        incidents.append(incident)
    return incidents


# Shares and counts ------------------------------------------------------------------------------


def test_family_shares_are_40_30_20_10_percent():
    assert stats.family_shares(fixed_records()) == [
        Share("timeout", 4, 40.0),
        Share("oom", 3, 30.0),
        Share("rate_limit", 2, 20.0),
        Share("cuda", 1, 10.0),
    ]


def test_category_shares_count_each_category_once_ties_by_name():
    shares = stats.category_shares(fixed_records())
    assert [share.key for share in shares] == sorted(category for category, *_ in FIXED_SET)
    assert all(share.count == 1 and share.percent == 10.0 for share in shares)


def test_status_counts_name_every_status():
    assert stats.status_counts(fixed_records()) == {"open": 2, "mitigated": 1, "resolved": 7}
    assert stats.status_counts([]) == {"open": 0, "mitigated": 0, "resolved": 0}


def test_the_instances_with_the_most_incidents_come_first():
    assert stats.top_instances(fixed_records()) == [("vllm-a", 4), ("vllm-b", 3), ("vllm-c", 2)]
    assert stats.top_instances(fixed_records(), limit=1) == [("vllm-a", 4)]


# MTTA and MTTR ----------------------------------------------------------------------------------


def test_mtta_and_mttr_overall_use_only_incidents_with_both_timestamps():
    overall = stats.response_times(fixed_records())
    # acknowledged: 10 20 30 5 7 30 4 60 -> 166 / 8 = 20.75; sorted 4 5 7 10 | 20 30 30 60 -> median 15
    assert overall.mtta == DurationStats(8, 20.75, 15.0)
    # resolved: 60 120 30 45 300 16 600 -> 1171 / 7; sorted 16 30 45 60 120 300 600 -> median 60
    assert overall.mttr.count == 7
    assert overall.mttr.mean_minutes == pytest.approx(1171 / 7)
    assert overall.mttr.median_minutes == 60.0


def test_mtta_and_mttr_by_family_follow_the_shares_order():
    by_family = {times.key: times for times in stats.response_by_family(fixed_records())}
    assert list(by_family) == ["timeout", "oom", "rate_limit", "cuda"]
    # timeout: acknowledged 10 20 30 (mean 20, median 20), resolved 60 120 (mean 90, median 90)
    assert by_family["timeout"].mtta == DurationStats(3, 20.0, 20.0)
    assert by_family["timeout"].mttr == DurationStats(2, 90.0, 90.0)
    # oom: acknowledged 5 7 30 (mean 14, median 7), resolved 30 45 300 (mean 125, median 45)
    assert by_family["oom"].mtta == DurationStats(3, 14.0, 7.0)
    assert by_family["oom"].mttr == DurationStats(3, 125.0, 45.0)
    # rate_limit: only the 429 one was acknowledged (4) and resolved (16)
    assert by_family["rate_limit"].mtta == DurationStats(1, 4.0, 4.0)
    assert by_family["rate_limit"].mttr == DurationStats(1, 16.0, 16.0)
    assert by_family["cuda"].incidents == 1
    assert by_family["cuda"].mttr == DurationStats(1, 600.0, 600.0)


def test_a_family_with_no_acknowledged_incident_has_no_mtta():
    record = IncidentRecord(id=1, category="oom.gpu", **_times(0, None, None))
    assert stats.response_times([record]).mtta == DurationStats(0, None, None)


def test_an_acknowledgement_recorded_before_detection_is_left_out_of_mtta():
    times = _times(0, 10, 30)
    times["acknowledged_at"] = times["detected_at"] - timedelta(minutes=3)
    record = IncidentRecord(id=1, category="oom.gpu", **times)
    assert record.time_to_acknowledge is None
    assert stats.response_times([record]).mttr == DurationStats(1, 30.0, 30.0)


# Over time --------------------------------------------------------------------------------------


def test_weekly_counts_and_response_times_per_iso_week():
    weeks = stats.weekly(fixed_records())
    assert [(w.week, w.starts.isoformat(), w.incidents) for w in weeks] == [
        ("2025-W10", "2025-03-03", 4),
        ("2025-W11", "2025-03-10", 3),
        ("2025-W12", "2025-03-17", 3),
    ]
    # W10: acknowledged 10 20 5 4 -> 9.75, resolved 60 120 30 16 -> 56.5
    assert (weeks[0].mtta.mean_minutes, weeks[0].mttr.mean_minutes) == (9.75, 56.5)
    # W11: acknowledged 30 7 -> 18.5, resolved 45; W12: acknowledged 30 60 -> 45, resolved 300 600 -> 450
    assert (weeks[1].mtta.mean_minutes, weeks[1].mttr.mean_minutes) == (18.5, 45.0)
    assert (weeks[2].mtta.mean_minutes, weeks[2].mttr.mean_minutes) == (45.0, 450.0)


def test_a_quiet_week_between_two_busy_ones_counts_zero():
    records = [r for r in fixed_records() if r.started_at < T0 + timedelta(days=7) or r.id in (7, 10)]
    weeks = stats.weekly(records)
    assert [(w.week, w.incidents) for w in weeks] == [("2025-W10", 4), ("2025-W11", 0), ("2025-W12", 2)]
    assert weeks[1].mtta == DurationStats(0, None, None)


def test_an_incident_late_on_sunday_belongs_to_that_iso_week():
    sunday_night = datetime(2025, 3, 9, 23, 59, tzinfo=UTC)
    record = IncidentRecord(id=1, category="oom.gpu", started_at=sunday_night, detected_at=sunday_night)
    assert [w.week for w in stats.weekly([record])] == ["2025-W10"]


# The figures dict -------------------------------------------------------------------------------


def test_review_figures_round_to_a_tenth_and_are_plain_json():
    figures = stats.review_figures(fixed_records())
    assert figures["total"] == 10
    assert [(f["key"], f["percent"]) for f in figures["families"]] == [
        ("timeout", 40.0),
        ("oom", 30.0),
        ("rate_limit", 20.0),
        ("cuda", 10.0),
    ]
    assert figures["response"]["overall"]["mttr"] == {
        "count": 7, "mean": 167.3, "median": 60.0, "mean_s": 10037, "median_s": 3600,
    }  # fmt: skip
    assert figures["categories"][0] == {
        "key": "cuda.xid",
        "count": 1,
        "percent": 10.0,
        "label": "GPU hardware fault (XID, ECC)",
    }
    assert figures["weeks"][0]["mtta"] == {
        "count": 4,
        "mean": 9.8,
        "median": 7.5,
        "mean_s": 585,
        "median_s": 450,
    }
    assert figures["top_instances"][0] == {"instance": "vllm-a", "incidents": 4}
    assert json.loads(json.dumps(figures)) == figures


def test_review_figures_of_no_incidents_are_empty_not_an_error():
    figures = stats.review_figures([])
    assert figures["total"] == 0
    assert figures["families"] == figures["weeks"] == figures["top_instances"] == []
    assert figures["response"]["overall"]["mtta"] == {
        "count": 0, "mean": None, "median": None, "mean_s": None, "median_s": None,
    }  # fmt: skip


def test_a_csv_row_gives_minutes_and_joins_names():
    record = IncidentRecord(
        id=7, title="KV cache", category="oom.kv_pressure", **_times(0, 7, 45), instances=("a", "b")
    )
    row = dict(zip(stats.CSV_COLUMNS, stats.csv_row(record), strict=True))
    assert row["family"] == "oom"
    assert (row["tta_minutes"], row["ttr_minutes"]) == ("7.0", "45.0")
    assert row["started"] == "2025-03-03T10:00:00+00:00"
    assert row["instances"] == "a;b"


# Parsing times ----------------------------------------------------------------------------------

NOW = datetime(2025, 3, 31, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7d", NOW - timedelta(days=7)),
        ("30d", NOW - timedelta(days=30)),
        ("2w", NOW - timedelta(days=14)),
        ("2025-03-01", datetime(2025, 3, 1, tzinfo=UTC)),
        ("2025-03-01T14:30", datetime(2025, 3, 1, 14, 30, tzinfo=UTC)),
        ("2025-03-01T14:30+02:00", datetime(2025, 3, 1, 12, 30, tzinfo=UTC)),
    ],
)
def test_times_are_read_as_shortcuts_dates_or_datetimes(settings, value, expected):
    settings.TIME_ZONE = "UTC"
    assert stats.parse_moment(value, now=NOW) == expected


def test_an_until_date_counts_the_whole_day(settings):
    settings.TIME_ZONE = "UTC"
    assert stats.parse_moment("2025-03-01", now=NOW, end_of_day=True) == datetime(2025, 3, 2, tzinfo=UTC)


@pytest.mark.parametrize("value", ["yesterday", "30", "30m", "2025-02-30", ""])
def test_a_bad_time_is_refused_with_the_forms_it_takes(value):
    with pytest.raises(ValueError, match="use 7d, 30d, 90d"):
        stats.parse_moment(value, now=NOW)


# Filters (in the ORM) ---------------------------------------------------------------------------


def _titles(filters: ReviewFilters) -> list[str]:
    incidents = stats.filter_incidents(filters=filters).order_by("started_at")
    return [incident.title.split(":")[0] for incident in incidents]


@pytest.mark.django_db
def test_records_built_from_rows_match_the_fixed_set():
    create_fixed_set()
    records = stats.load_records(filters=ReviewFilters())
    expected = sorted(fixed_records(), key=lambda r: r.started_at)
    fields = ("category", "status", "started_at", "acknowledged_at", "resolved_at", "instances")
    assert [[getattr(r, f) for f in fields] for r in records] == [
        [getattr(r, f) for f in fields] for r in expected
    ]
    assert stats.review_figures(records)["families"] == stats.review_figures(expected)["families"]


@pytest.mark.django_db
def test_loading_the_records_takes_three_queries(django_assert_num_queries):
    create_fixed_set()
    with django_assert_num_queries(3):  # incidents, their hosts, their instances
        stats.load_records(filters=ReviewFilters())


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (ReviewFilters(family="oom"), ["Incident 5", "Incident 6", "Incident 7"]),
        (ReviewFilters(family="cuda"), ["Incident 10"]),
        (ReviewFilters(category="timeout.tps"), ["Incident 2"]),
        (ReviewFilters(status="open"), ["Incident 4", "Incident 9"]),
        (ReviewFilters(instance="vllm-c"), ["Incident 7", "Incident 10"]),
        (ReviewFilters(host="gpu-node-c"), ["Incident 7", "Incident 10"]),
        (ReviewFilters(model="meta-llama/Llama-3.1-70B"), ["Incident 7", "Incident 10"]),
        (ReviewFilters(model="mistralai/Mistral-7B"), ["Incident 9"]),
        (ReviewFilters(family="timeout", instance="vllm-a"), ["Incident 1", "Incident 2", "Incident 4"]),
        (ReviewFilters(severity="critical"), []),
    ],
)
def test_each_filter_selects_its_incidents(filters, expected):
    create_fixed_set()
    assert _titles(filters) == expected


@pytest.mark.django_db
def test_the_time_range_is_by_start_since_inclusive_until_exclusive():
    create_fixed_set()
    week_11 = ReviewFilters(since=T0 + timedelta(days=7), until=T0 + timedelta(days=14))
    assert _titles(week_11) == ["Incident 3", "Incident 4", "Incident 6"]


@pytest.mark.django_db
def test_a_host_matches_its_own_incidents_and_its_instances_once_each():
    host = make_host(name="gpu-node-z")
    first, second = make_instance(host, name="vllm-y"), make_instance(host, name="vllm-z")
    incident = Incident.objects.create(title="Both", category="cuda.nccl")
    incident.instances.set([first, second])
    incident.hosts.set([host])
    Incident.objects.create(title="Elsewhere", category="cuda.nccl")
    assert list(stats.filter_incidents(filters=ReviewFilters(host="gpu-node-z"))) == [incident]


@pytest.mark.django_db
def test_a_family_matches_its_categories_and_other_matches_other():
    Incident.objects.create(title="gpu", category="gpu.thermal")
    Incident.objects.create(title="other", category="other")
    assert _titles(ReviewFilters(family="gpu")) == ["gpu"]
    assert _titles(ReviewFilters(family="other")) == ["other"]


def test_a_title_a_spreadsheet_would_run_as_a_formula_is_quoted_in_the_csv():
    record = IncidentRecord(
        id=7, title="=HYPERLINK(1)", category="oom.kv_pressure", **_times(0, 7, 45), models=("@SUM(A1)",)
    )
    row = dict(zip(stats.CSV_COLUMNS, stats.csv_row(record), strict=True))
    assert (row["title"], row["models"]) == ("'=HYPERLINK(1)", "'@SUM(A1)")
    assert row["category"] == "oom.kv_pressure" and row["tta_minutes"] == "7.0"


# Drills and real acknowledgements ---------------------------------------------------------------


@pytest.mark.django_db
def test_drill_incidents_are_left_out_of_every_review():
    create_fixed_set()
    Incident.objects.create(title="Drill: KV pressure", category="oom.kv_pressure", source="drill")
    assert len(stats.load_records(filters=ReviewFilters())) == len(FIXED_SET)
    assert "Drill" not in _titles(ReviewFilters(family="oom"))


@pytest.mark.django_db
def test_mtta_counts_only_incidents_a_person_acknowledged_not_ones_resolved_without():
    from incidents import lifecycle

    start = T0 + timedelta(hours=10)
    acknowledged, resolved = (
        Incident.objects.create(title=title, category="oom.gpu", started_at=start, detected_at=start)
        for title in ("acknowledged", "only resolved")
    )
    lifecycle.acknowledge(acknowledged, at=start + timedelta(minutes=4), user="sam")
    lifecycle.set_status(resolved, status="resolved", at=start + timedelta(minutes=90), user="sam")
    overall = stats.review_figures(stats.load_records(filters=ReviewFilters()))["response"]["overall"]
    assert overall["incidents"] == 2
    assert overall["mtta"] == {"count": 1, "mean": 4.0, "median": 4.0, "mean_s": 240, "median_s": 240}
    assert overall["mttr"]["count"] == 1
