"""The downloads carry no live payloads: the Markdown postmortem keeps every field people or
probes wrote readable but inert once rendered (no script or data links, no raw HTML), and the
review's CSV opens no cell as a formula while its figures stay numbers."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from incidents.models import Incident, TimelineEntry
from incidents.stats import CSV_COLUMNS
from tests.inert_html import live_parts

pytestmark = pytest.mark.django_db

XSS = {
    "title": "<script>alert('title')</script> [t](javascript:alert(1))",
    "root_cause": "[rc](JaVaScRiPt:alert(1)) <img src=x onerror=alert(1)>",
    "resolution": "![r](data:image/svg+xml,<svg onload=alert(1)>) [ok](https://runbooks.example.com/kv)",
    "follow_ups": "- [f](java\tscript:alert(1))\n- [g]\n\n[g]: &#106;avascript:alert(1)",
    "note": "<iframe src=//evil.example></iframe>\n\n[n](vbscript:msgbox(1)) <javascript:alert(1)>",
    "author": "sam\n[a]: javascript:alert(1)",
    "model": "[m](file:///etc/passwd)",
    "evidence": "<svg/onload=alert(1)>",
}


def payload_incident() -> Incident:
    item = Incident.objects.create(
        title=XSS["title"],
        category="oom.kv_pressure",
        root_cause=XSS["root_cause"],
        resolution=XSS["resolution"],
        follow_ups=XSS["follow_ups"],
        models_affected=[XSS["model"], '=HYPERLINK("http://evil.example","x")'],
        evidence={
            "instances": {
                "<b onmouseover=alert(1)>vllm-a</b>": {
                    "model": XSS["model"],
                    "host": "[h](data:text/html,x)",
                    "verdict": "&#x6A;avascript:alert(1)",
                    "findings": [{"evidence": XSS["evidence"]}],
                }
            }
        },
    )
    TimelineEntry.objects.create(incident=item, kind="note", text=XSS["note"], author=XSS["author"])
    return item


def test_no_field_of_the_postmortem_runs_once_rendered(viewer_client):
    item = payload_incident()
    text = viewer_client.get(reverse("incidents:postmortem", args=[item.pk])).content.decode()
    assert live_parts(text) == []
    assert "alert('title')" in text and "msgbox(1)" in text  # still there to read
    assert "[ok](https://runbooks.example.com/kv)" in text  # a web link stays a link


def test_the_postmortem_would_be_live_without_it():
    # The same fields written as they are: what the download used to carry.
    assert all(live_parts(value) for key, value in XSS.items() if key != "author")


def test_a_one_line_field_cannot_add_a_reference_definition_of_its_own(viewer_client):
    item = payload_incident()
    text = viewer_client.get(reverse("incidents:postmortem", args=[item.pk])).content.decode()
    assert "\n[a]:" not in text and "(sam [a]: javascript" in text


def csv_rows(client) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(client.get(reverse("incidents:review-csv")).content.decode())))


def test_no_csv_cell_opens_as_a_formula(viewer_client):
    now = timezone.now()
    Incident.objects.create(
        title="@SUM(1+1)*cmd|' /C calc'!A0",
        category="oom.kv_pressure",
        models_affected=["-2+3+cmd|' /C calc'!A0", "x"],
        started_at=now - timedelta(hours=2),
        detected_at=now - timedelta(hours=2),
        acknowledged_at=now - timedelta(hours=1, minutes=53),
    )
    [row] = csv_rows(viewer_client)
    assert row["title"] == "'@SUM(1+1)*cmd|' /C calc'!A0"
    assert row["models"] == "'-2+3+cmd|' /C calc'!A0;x"
    assert row["tta_minutes"] == "7.0" and row["id"].isdigit()  # figures stay numbers
    assert tuple(row) == CSV_COLUMNS
