"""The incident lifecycle's rules that no single intake owns: acknowledging (once, by a person,
never a resolved incident, and never as a side effect of a status change) and the reopen
window (a fault firing again soon after mitigation reopens its incident; after the window, the
old incident is resolved and a new one opens)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from incidents import lifecycle
from incidents.models import Incident, NotificationDelivery, NotificationTarget, Status

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
KEY = "instance:7:process.hung"


def fire(at: datetime) -> tuple[Incident, bool]:
    return lifecycle.open_or_join(
        key=KEY, title="Engine hung on chat-a", category="process.hung", severity="critical",
        source="rule", at=at, text="Engine hung.",
    )  # fmt: skip


def clear(at: datetime) -> Incident | None:
    return lifecycle.alert_cleared(key=KEY, at=at, text="Engine answers again.")


# Acknowledging ----------------------------------------------------------------------------------


def test_acknowledging_stamps_the_time_once_with_who_did_it():
    incident, _ = fire(T0)
    assert lifecycle.acknowledge(incident, at=T0 + timedelta(minutes=4), user="sam") is True
    assert lifecycle.acknowledge(incident, at=T0 + timedelta(minutes=9), user="ada") is False
    incident.refresh_from_db()
    assert incident.acknowledged_at == T0 + timedelta(minutes=4)
    assert lifecycle.acknowledged_by(incident) == "sam"
    entry = incident.timeline.get(data__acknowledged=True)
    assert (entry.text, entry.author, entry.kind) == ("Acknowledged by sam.", "sam", "status")


def test_a_mitigated_incident_can_still_be_acknowledged():
    incident, _ = fire(T0)
    clear(T0 + timedelta(minutes=2))
    incident.refresh_from_db()
    assert lifecycle.acknowledge(incident, at=T0 + timedelta(minutes=3), user="sam") is True


def test_acknowledging_a_resolved_incident_is_refused_clearly():
    incident, _ = fire(T0)
    lifecycle.set_status(incident, status=Status.RESOLVED, at=T0 + timedelta(minutes=5), user="sam")
    with pytest.raises(ValueError, match=f"Incident {incident.pk} is resolved: there is nothing left"):
        lifecycle.acknowledge(incident, at=T0 + timedelta(minutes=6), user="sam")
    incident.refresh_from_db()
    assert incident.acknowledged_at is None


@pytest.mark.parametrize("status", [Status.MITIGATED, Status.RESOLVED])
def test_mitigating_or_resolving_is_no_acknowledgement(status):
    incident, _ = fire(T0)
    lifecycle.set_status(incident, status=status, at=T0 + timedelta(minutes=5), user="sam")
    incident.refresh_from_db()
    assert incident.acknowledged_at is None and lifecycle.acknowledged_by(incident) == ""


# The reopen window ------------------------------------------------------------------------------


def test_a_fault_firing_again_within_the_window_reopens_its_incident(settings):
    settings.INCIDENT_REOPEN_WINDOW_S = 1800
    first, _ = fire(T0)
    clear(T0 + timedelta(minutes=5))
    again, opened = fire(T0 + timedelta(minutes=14))  # clear for 9 minutes
    assert (again.pk, opened) == (first.pk, False)
    assert again.status == "open" and Incident.objects.count() == 1


def test_after_the_window_the_old_incident_is_resolved_and_a_new_one_opens(
    settings, django_capture_on_commit_callbacks
):
    settings.INCIDENT_REOPEN_WINDOW_S = 1800
    NotificationTarget.objects.create(name="pager", url="https://hooks.example.com/x", min_severity="info")
    first, _ = fire(T0)
    clear(T0 + timedelta(minutes=5))
    later = T0 + timedelta(minutes=5, seconds=1801)
    with django_capture_on_commit_callbacks() as callbacks:
        new, opened = fire(later)
    for callback in callbacks:  # the notifications, as the commit would queue them
        callback()
    first.refresh_from_db()
    assert opened and new.pk != first.pk and new.dedup_key == first.dedup_key == KEY
    assert (first.status, first.resolved_at, first.acknowledged_at) == ("resolved", later, None)
    entry = first.timeline.order_by("-at", "-id").first()
    assert entry.kind == "status" and entry.author == ""
    assert entry.text.startswith("Stayed clear for longer than the reopen window (30 min): resolved.")
    events = set(NotificationDelivery.objects.values_list("incident_id", "event"))
    assert events == {(first.pk, "resolved"), (new.pk, "opened")}


def test_the_window_is_a_setting(settings):
    settings.INCIDENT_REOPEN_WINDOW_S = 300
    first, _ = fire(T0)
    clear(T0 + timedelta(minutes=1))
    new, opened = fire(T0 + timedelta(minutes=7))  # clear for 6 minutes, longer than 5
    assert opened and new.pk != first.pk


def test_an_open_incident_is_joined_however_long_ago_it_opened(settings):
    settings.INCIDENT_REOPEN_WINDOW_S = 300
    first, _ = fire(T0)
    again, opened = fire(T0 + timedelta(days=2))
    assert (again.pk, opened) == (first.pk, False)
