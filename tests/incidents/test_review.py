"""The review page, its CSV export and `manage.py incidents report`: the same filters and the
same figures everywhere, readable by every role."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from incidents.models import Incident
from incidents.stats import CSV_COLUMNS
from tests.incidents.test_stats import FIXED_SET, create_fixed_set

pytestmark = pytest.mark.django_db

REVIEW, CSV = reverse("incidents:review"), reverse("incidents:review-csv")
MARCH = {"since": "2025-03-01", "until": "2025-03-31"}  # the whole fixed set
CHARTS = ["families", "response", "weekly-count", "weekly-response", "instances"]


@pytest.fixture(autouse=True)
def _utc(settings):
    settings.TIME_ZONE = "UTC"  # the fixed set's weeks and the CSV's times are in UTC


def _report(*args: str) -> str:
    out = io.StringIO()
    call_command("incidents", "report", *args, stdout=out)
    return out.getvalue()


# Permissions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [REVIEW, CSV])
def test_anonymous_users_are_sent_to_the_login_page(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


@pytest.mark.parametrize("url", [REVIEW, CSV])
def test_a_user_in_no_role_group_is_refused(client, cast, url):
    client.force_login(cast.outsider)
    assert client.get(url).status_code == 403


@pytest.mark.parametrize("url", [REVIEW, CSV])
def test_viewers_may_read_the_review_and_its_csv(viewer_client, url):
    assert viewer_client.get(url).status_code == 200


# The page ---------------------------------------------------------------------------------------


def test_the_page_draws_every_chart_from_embedded_json(viewer_client):
    create_fixed_set()
    response = viewer_client.get(REVIEW, MARCH)
    assert [chart["id"] for chart in response.context["charts"]] == CHARTS
    html = response.content.decode()
    for chart in CHARTS:
        assert f'data-figure-id="{chart}-figure"' in html
        assert f'<script id="{chart}-figure" type="application/json">' in html
    assert "vendor/plotly" in html and "ops_console/charts.js" in html
    pie = response.context["charts"][0]["figure"]["data"][0]
    assert (pie["labels"], pie["values"]) == (["timeout", "oom", "rate_limit", "cuda"], [4, 3, 2, 1])


def test_the_table_shows_each_familys_share_and_response_times(viewer_client):
    create_fixed_set()
    response = viewer_client.get(REVIEW, MARCH)
    rows = {row["key"]: row for row in response.context["family_rows"]}
    assert rows["timeout"]["percent"] == 40.0
    assert rows["oom"]["mtta"] == {"count": 3, "mean": 14.0, "median": 7.0, "mean_s": 840, "median_s": 420}
    assert rows["oom"]["mttr"] == {
        "count": 3,
        "mean": 125.0,
        "median": 45.0,
        "mean_s": 7500,
        "median_s": 2700,
    }
    html = response.content.decode()
    assert '<td class="num">40 %</td>' in html
    assert '<td class="num">2 h 5 min</td>' in html  # oom's MTTR mean, 125 minutes
    assert "mean 20 min 45 s, median 15 min" in html  # overall MTTA: 166 / 8, (10 + 20) / 2
    assert "MTTA over 8 of 10 incidents" in html and "MTTR over 7 of 10 incidents" in html
    assert "2 open, 1 mitigated, 7 resolved" in html
    assert "0 critical, 10 major, 0 minor, 0 info" in html


def test_the_filters_stay_in_the_url_and_narrow_the_figures(viewer_client):
    create_fixed_set()
    response = viewer_client.get(REVIEW, MARCH | {"family": "oom", "instance": "vllm-a"})
    assert response.context["figures"]["total"] == 1
    assert response.context["figures"]["categories"][0]["key"] == "oom.kv_pressure"
    html = response.content.decode()
    assert 'value="vllm-a"' in html
    assert '<option value="oom" selected>oom</option>' in html
    assert "family=oom" in html  # the CSV link carries the filters


def test_a_first_visit_covers_the_last_30_days(viewer_client):
    Incident.objects.create(title="recent", category="oom.gpu", started_at=timezone.now() - timedelta(days=3))
    Incident.objects.create(title="old", category="oom.gpu", started_at=timezone.now() - timedelta(days=40))
    assert viewer_client.get(REVIEW).context["figures"]["total"] == 1
    assert viewer_client.get(REVIEW, {"since": "90d"}).context["figures"]["total"] == 2
    assert viewer_client.get(REVIEW, {"since": ""}).context["figures"]["total"] == 2  # blank: all time


def test_with_no_incidents_the_page_says_so_and_draws_no_chart(viewer_client):
    response = viewer_client.get(REVIEW)
    assert response.status_code == 200
    assert response.context["charts"] == []
    html = response.content.decode()
    assert "No incidents match these filters." in html
    assert "data-figure-id" not in html


def test_a_bad_time_shows_the_error_instead_of_figures(viewer_client):
    response = viewer_client.get(REVIEW, {"since": "last tuesday"})
    assert response.status_code == 200
    assert response.context["figures"] is None
    assert "is not a time: use 7d, 30d, 90d" in response.content.decode()


def test_the_page_takes_a_fixed_number_of_queries(viewer_client, django_assert_max_num_queries):
    create_fixed_set()
    # session, user, groups; incidents, hosts, instances; the three datalists
    with django_assert_max_num_queries(10):
        viewer_client.get(REVIEW, MARCH)


# CSV --------------------------------------------------------------------------------------------


def test_the_csv_has_one_row_per_filtered_incident_with_every_column(viewer_client):
    create_fixed_set()
    response = viewer_client.get(CSV, MARCH)
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == 'attachment; filename="incidents-2025-03-01-to-2025-03-31.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == len(FIXED_SET)
    first = rows[0]
    assert first["title"] == "Incident 1: timeout.ttft"
    assert (first["category"], first["family"], first["status"]) == ("timeout.ttft", "timeout", "resolved")
    assert first["started"] == "2025-03-04T10:00:00+00:00"
    assert first["detected"] == "2025-03-04T10:05:00+00:00"
    assert (first["tta_minutes"], first["ttr_minutes"]) == ("10.0", "60.0")
    assert first["instances"] == "vllm-a"
    unresolved = next(row for row in rows if row["title"].startswith("Incident 9:"))
    assert (unresolved["acknowledged"], unresolved["tta_minutes"], unresolved["ttr_minutes"]) == ("", "", "")
    assert unresolved["models"] == "mistralai/Mistral-7B"


def test_the_csv_uses_the_pages_filters(viewer_client):
    create_fixed_set()
    response = viewer_client.get(CSV, MARCH | {"family": "cuda"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["category"] for row in rows] == ["cuda.xid"]


def test_the_csv_refuses_a_bad_time(viewer_client):
    response = viewer_client.get(CSV, {"since": "soon"})
    assert response.status_code == 400
    assert "since" in response.content.decode()


# The CLI ----------------------------------------------------------------------------------------


def test_the_cli_json_is_the_pages_figures(viewer_client):
    create_fixed_set()
    page = viewer_client.get(REVIEW, MARCH).context["figures"]
    assert json.loads(_report("--since", "2025-03-01", "--until", "2025-03-31", "--json")) == page
    oom = viewer_client.get(REVIEW, MARCH | {"family": "oom"}).context["figures"]
    assert json.loads(_report("--since", "all", "--family", "oom", "--json")) == oom


def test_the_cli_text_table_shows_the_pages_figures(viewer_client):
    create_fixed_set()
    figures = viewer_client.get(REVIEW, MARCH).context["figures"]
    lines = _report("--since", "2025-03-01", "--until", "2025-03-31").splitlines()
    assert lines[0] == (
        "Incidents started since 2025-03-01 00:00, before 2025-04-01 00:00: "
        "10 (2 open, 1 mitigated, 7 resolved)"
    )
    table = {line.split()[0]: line.split()[1:] for line in lines[3:8]}
    for share, times in zip(figures["families"], figures["response"]["by_family"], strict=True):
        expected = [str(share["count"]), str(share["percent"]), "%"]
        expected += [f"{times[w][s]:.1f}" for w in ("mtta", "mttr") for s in ("mean", "median")]
        assert table[share["key"]] == expected
    assert table["all"] == ["10", "100.0", "%", "20.8", "15.0", "167.3", "60.0"]
    assert any(line.split() == ["2025-W12", "3", "45.0", "450.0"] for line in lines)
    assert any(line.split() == ["vllm-a", "4"] for line in lines)
    assert "MTTA over 8 of 10 incidents (acknowledged), MTTR over 7 of 10 (resolved)." in "\n".join(lines)


def test_the_cli_says_so_when_nothing_matches():
    assert _report("--since", "7d").strip().endswith(": 0 (0 open, 0 mitigated, 0 resolved)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "a fortnight"], "--since: 'a fortnight' is not a time"),
        (["--until", "2025-13-01"], "--until: '2025-13-01' is not a time"),
        (["--since", "2025-03-10", "--until", "2025-03-01"], "--until must come after --since"),
    ],
)
def test_the_cli_refuses_bad_times_clearly(args, message):
    with pytest.raises(CommandError, match=message):
        _report(*args)


# Drills -----------------------------------------------------------------------------------------


def test_drills_are_left_out_of_the_page_the_csv_and_the_cli(viewer_client):
    create_fixed_set()
    Incident.objects.create(
        title="Drill: engine down", category="process.not_started", source="drill",
        started_at=datetime(2025, 3, 5, 10, tzinfo=UTC),
    )  # fmt: skip
    assert viewer_client.get(REVIEW, MARCH).context["figures"]["total"] == 10
    rows = list(csv.DictReader(io.StringIO(viewer_client.get(CSV, MARCH).content.decode())))
    assert len(rows) == 10 and not any(row["title"].startswith("Drill") for row in rows)
    assert json.loads(_report("--since", "all", "--json"))["total"] == 10
