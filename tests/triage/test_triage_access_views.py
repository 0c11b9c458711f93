"""The triage page on an access log: the story leads (headline, status mix, chart, top
talkers), the rule matches follow, long evidence folds behind "show all", and the form folds
away once there is an answer. An uploaded access log's run page tells the same story."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from diagnostics.models import TriageRun
from diagnostics.triage_service import run_upload
from tests.triage import access_logs

pytestmark = pytest.mark.django_db


@pytest.fixture
def engineer(client, cast):
    client.force_login(cast.engineer)
    return client


def paste(client, text: str) -> str:
    response = client.post(reverse("diagnostics:triage"), {"text": text})
    assert response.status_code == 200
    return response.content.decode()


def test_it_leads_with_the_429_story_then_talkers_then_the_rule_matches(engineer):
    html = paste(engineer, access_logs.rate_limit_spike())
    headline = html.index('id="story-headline"')
    assert "88 % of the 429s came from client 10.0.3.7 between 14:00 and 14:05" in html
    assert headline < html.index("Top talkers by client IP") < html.index("Detailed rule matches")
    assert html.index("Detailed rule matches") < html.index("Matched lines")
    assert "Rate limiting: HTTP 429 from a gateway" in html[html.index("Detailed rule matches") :]


def test_the_lead_client_is_marked_among_the_top_talkers(engineer):
    html = paste(engineer, access_logs.rate_limit_spike())
    row = re.search(r'<tr class="lead-talker">\s*<td class="who">([^<]+)</td>', html)
    assert row and row.group(1) == "10.0.3.7"


def test_the_chart_stacks_the_status_classes_per_minute(engineer):
    html = paste(engineer, access_logs.rate_limit_spike())
    figure = json.loads(
        re.search(r'<script id="access-figure" type="application/json">(.*?)</script>', html, re.S)[1]
    )
    traces = {trace["name"]: trace for trace in figure["data"]}
    assert set(traces) == {"2xx", "429", "5xx"} and figure["layout"]["barmode"] == "stack"
    minute = traces["429"]["x"].index("2026-12-03 14:02")
    assert traces["429"]["y"][minute] == 114


def test_long_evidence_folds_behind_show_all(engineer):
    html = paste(engineer, access_logs.rate_limit_spike())
    # 5 example lines of the 429 rule and 4 of the 5xx rule: 3 shown, the rest folded
    assert "Show all 9 matched lines" in html
    visible = html[: html.index("Show all 9 matched lines")]
    assert visible[visible.index("Matched lines") :].count('<pre class="log-excerpt">') == 3
    assert html.count('<pre class="log-excerpt">') == 9
    # six clients: five shown, the sixth in rows that "Show all 6" opens
    more = re.search(r'<tbody class="more-rows">(.*?)</tbody>', html, re.S)[1]
    assert more.count("<tr") == 1 and "Show all 6" in html


def test_the_form_folds_away_once_there_is_an_answer(engineer):
    empty = engineer.get(reverse("diagnostics:triage")).content.decode()
    assert re.search(r'<details class="card triage-input"\s+open>', empty)
    html = paste(engineer, access_logs.clean())
    assert re.search(r'<details class="card triage-input"\s*>', html)
    assert "Edit the log or triage another" in html


def test_a_clean_access_log_says_nothing_is_wrong(engineer):
    html = paste(engineer, access_logs.clean())
    assert "Nothing wrong: no rate limiting, no server errors and no slow requests in 600 requests" in html
    assert "story-ok" in html and "No known failure" not in html


def test_upstream_timeouts_lead_as_gateway_timeouts(engineer):
    html = paste(engineer, access_logs.upstream_timeouts())
    assert "Gateway timeouts (504): 120 requests timed out waiting for upstream 10.0.1.11:8000" in html


def test_an_uploaded_access_log_tells_its_story_on_the_run_page(engineer, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    upload = SimpleUploadedFile("access.log", access_logs.rate_limit_spike().encode())
    engineer.post(reverse("diagnostics:triage"), {"file": upload})
    run = TriageRun.objects.get()
    run_upload(run_id=run.pk)
    html = engineer.get(reverse("diagnostics:triage-run", args=[run.pk])).content.decode()
    assert "from client 10.0.3.7 between 14:00 and 14:05" in html
    assert html.index('id="story-headline"') < html.index("Detailed rule matches")
