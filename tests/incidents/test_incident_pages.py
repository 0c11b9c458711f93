"""Incident pages: the list with filters, the incident with its timeline and sanitized notes,
opening by hand with the same fields, edits kept in the timeline, status changes, attached
walkthroughs and triage results, the Markdown postmortem, and who may do what."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from diagnostics.models import SavedWalkthrough, TriageRun
from incidents.models import Incident, TimelineEntry
from tests.factories import make_host, make_instance

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)


@pytest.fixture
def sre(client, cast):
    client.force_login(cast.sre)
    return client


def incident(**fields):
    values = {"title": "KV cache above 95 % on chat-a", "category": "oom.kv_pressure", "started_at": T0,
              "detected_at": T0, "severity": "major"}  # fmt: skip
    values.update(fields)
    return Incident.objects.create(**values)


def test_the_list_filters_by_status_and_severity(viewer_client):
    incident(title="open one")
    incident(title="resolved one", status="resolved", resolved_at=T0)
    content = viewer_client.get(reverse("incidents:index"), {"status": "resolved"}).content.decode()
    assert "resolved one" in content and "open one" not in content


def test_the_list_hides_drills_unless_asked_for_by_source(viewer_client):
    incident(title="real outage", source="alertmanager")
    incident(title="practice outage", source="drill")
    url = reverse("incidents:index")
    by_default = viewer_client.get(url).content.decode()
    assert "real outage" in by_default and "practice outage" not in by_default
    drills = viewer_client.get(url, {"source": "drill"}).content.decode()
    assert "practice outage" in drills and "real outage" not in drills
    everything = viewer_client.get(url, {"source": "all"}).content.decode()
    assert "practice outage" in everything and "real outage" in everything
    assert '<option value="drill" selected>drill</option>' in drills


def test_the_list_marks_open_incidents_nobody_acknowledged_and_can_show_only_those(viewer_client):
    incident(title="nobody on it")
    incident(title="sam is on it", acknowledged_at=T0)
    incident(title="over", status="resolved", resolved_at=T0)
    url = reverse("incidents:index")
    content = viewer_client.get(url).content.decode()
    assert content.count("not acknowledged</span>") == 1
    only = viewer_client.get(url, {"acknowledged": "no"}).content.decode()
    assert "nobody on it" in only and "sam is on it" not in only and "over</a>" not in only


def test_the_list_says_how_long_each_incident_is_open_for_people(viewer_client):
    incident(title="resolved one", status="resolved", resolved_at=T0 + timedelta(minutes=9, seconds=20))
    assert "resolved after 9 min 20 s" in viewer_client.get(reverse("incidents:index")).content.decode()


def test_the_lists_pages_keep_the_filters(viewer_client):
    for n in range(26):
        incident(title=f"drill {n}", source="drill")
    content = viewer_client.get(reverse("incidents:index"), {"source": "drill"}).content.decode()
    assert 'href="?source=drill&amp;page=2"' in content


def test_the_list_has_an_empty_state(viewer_client):
    assert "No incidents" in viewer_client.get(reverse("incidents:index")).content.decode()


def test_notes_are_markdown_and_sanitized(sre):
    item = incident()
    sre.post(
        reverse("incidents:note", args=[item.pk]),
        {"text": "**KV** full <script>alert(1)</script> [x](javascript:alert(1))"},
    )
    content = sre.get(item.get_absolute_url()).content.decode()
    assert (
        "<strong>KV</strong>" in content
        and "<script>alert(1)" not in content
        and "javascript:" not in content
    )
    assert TimelineEntry.objects.get(kind="note").author == "sam"


def test_an_incident_is_opened_by_hand_with_the_same_fields(sre):
    instance = make_instance(make_host(), name="chat-b")
    response = sre.post(
        reverse("incidents:create"),
        {"title": "Users report 504s", "category": "timeout.ttft", "severity": "critical", "status": "open",
         "started_at": "2026-12-03T03:00", "detected_at": "2026-12-03T03:05", "instances": [instance.pk]},
    )  # fmt: skip
    created = Incident.objects.get()
    assert response.status_code == 302 and created.source == "manual"
    assert "chat-b" in created.evidence["instances"]
    assert created.timeline.get().kind == "opened"


def test_a_bad_form_keeps_what_was_typed_and_names_the_field(sre):
    response = sre.post(
        reverse("incidents:create"),
        {"title": "Broken", "category": "timeout.ttft", "severity": "major", "status": "resolved",
         "started_at": "2026-12-03T03:00", "detected_at": "2026-12-03T03:00"},
    )  # fmt: skip
    assert response.status_code == 400 and "Give the time it was resolved" in response.content.decode()
    assert 'value="Broken"' in response.content.decode()


def test_edits_are_kept_in_the_timeline(sre):
    item = incident()
    sre.post(
        reverse("incidents:edit", args=[item.pk]),
        {"title": item.title, "category": item.category, "severity": "critical", "status": "open",
         "started_at": "2026-12-03T03:00", "detected_at": "2026-12-03T03:00",
         "root_cause": "A batch of 30K prompts"},
    )  # fmt: skip
    edits = list(TimelineEntry.objects.filter(kind="edit").values_list("text", flat=True))
    assert any(text.startswith("Severity: major → critical") for text in edits)
    assert any("Root cause" in text and "30K prompts" in text for text in edits)


def test_status_changes_stamp_mitigated_and_resolved_but_are_no_acknowledgement(sre):
    item = incident()
    sre.post(reverse("incidents:status", args=[item.pk]), {"status": "mitigated"})
    sre.post(reverse("incidents:status", args=[item.pk]), {"status": "resolved"})
    item.refresh_from_db()
    assert item.status == "resolved" and item.resolved_at and item.mitigated_at
    assert item.acknowledged_at is None


def test_walkthroughs_and_triage_results_are_attached_as_they_were(sre):
    item = incident()
    walk = SavedWalkthrough.objects.create(
        tree="oom", title="KV pressure, not an OOM", steps=[{"q": 1}], created_by="sam"
    )
    result = {"category": "oom.gpu", "category_label": "OOM: GPU memory"}
    run = TriageRun.objects.create(filename="vllm.log", status="done", created_by="sam", result=result)
    sre.post(reverse("incidents:attach", args=[item.pk]), {"walkthrough": walk.pk})
    sre.post(reverse("incidents:attach", args=[item.pk]), {"triage": run.pk})
    kinds = dict(item.timeline.values_list("kind", "text"))
    assert (
        kinds["walkthrough"] == "KV pressure, not an OOM" and kinds["triage"] == "vllm.log: OOM: GPU memory"
    )


def test_the_postmortem_is_markdown_with_the_timeline(viewer_client):
    item = incident(root_cause="Long prompts filled the KV cache.")
    TimelineEntry.objects.create(incident=item, at=T0, kind="opened", text="Opened by a rule.")
    response = viewer_client.get(reverse("incidents:postmortem", args=[item.pk]))
    text = response.content.decode()
    assert response["Content-Type"].startswith("text/markdown")
    assert text.startswith("# Postmortem: KV cache above 95 % on chat-a")
    assert "Opened by a rule." in text and "Long prompts filled the KV cache." in text


@pytest.mark.parametrize(
    "role, read, write",
    [
        ("outsider", 403, 403),
        ("viewer", 200, 403),
        ("engineer", 200, 403),
        ("sre", 200, 302),
        ("admin", 200, 302),
    ],
)
def test_who_may_read_and_who_may_change(client, cast, role, read, write):
    item = incident()
    client.force_login(cast.for_role(role))
    assert client.get(item.get_absolute_url()).status_code == read
    assert (
        client.post(reverse("incidents:status", args=[item.pk]), {"status": "mitigated"}).status_code == write
    )


def test_anonymous_visitors_are_sent_to_log_in(client):
    response = client.get(reverse("incidents:index"))
    assert response.status_code == 302 and "/accounts/login/" in response.url


def test_the_postmortem_says_who_acknowledged_and_gives_times_for_people(viewer_client):
    from incidents import lifecycle

    item = incident()
    lifecycle.acknowledge(item, at=T0 + timedelta(minutes=4, seconds=12), user="sam")
    lifecycle.set_status(item, status="resolved", at=T0 + timedelta(hours=2, minutes=5), user="sam")
    text = viewer_client.get(reverse("incidents:postmortem", args=[item.pk])).content.decode()
    assert "- Acknowledged: 2026-12-03 03:04:12 UTC by sam; resolved: 2026-12-03 05:05:00 UTC" in text
    assert "- Time to acknowledge: 4 min 12 s" in text and "- Time to resolve: 2 h 5 min" in text


def test_a_mitigated_incident_says_how_long_it_took_to_mitigate_not_how_long_it_is_open(viewer_client):
    from datetime import timedelta

    from django.utils import timezone

    from incidents.models import Incident

    started = timezone.now() - timedelta(hours=2)
    Incident.objects.create(
        title="KV pressure on chat-a", category="oom.kv_pressure", severity="major", status="mitigated",
        started_at=started, detected_at=started, mitigated_at=started + timedelta(minutes=9, seconds=20),
        dedup_key="instance:1:oom.kv_pressure",
    )  # fmt: skip
    content = viewer_client.get("/incidents/").content.decode()
    assert "mitigated after 9 min 20 s" in content and "2 h" not in content
