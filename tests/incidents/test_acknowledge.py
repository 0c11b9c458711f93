"""Acknowledging an incident: the button on its page (a form POST, enhanced by HTMX), the
confirm page a notification links to (GET changes nothing, POST acknowledges), and the API;
SREs and above only, and never a resolved incident."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from incidents import delivery, lifecycle
from incidents.models import Incident, NotificationTarget
from tests.conftest import HTMX_HEADERS

pytestmark = pytest.mark.django_db


def incident(**fields) -> Incident:
    now = timezone.now()
    values = {"title": "Engine hung on chat-a", "category": "process.hung", "severity": "critical",
              "started_at": now - timedelta(minutes=6),
              "detected_at": now - timedelta(minutes=5)}  # fmt: skip
    return Incident.objects.create(**values | fields)


def acknowledge_url(item: Incident) -> str:
    return reverse("incidents:acknowledge", args=[item.pk])


def api_url(pk: int) -> str:
    return reverse("incidents:api-acknowledge", args=[pk])


# The button -------------------------------------------------------------------------------------


def test_an_sre_sees_the_button_as_a_real_form_enhanced_by_htmx(sre_client):
    item = incident()
    content = sre_client.get(item.get_absolute_url()).content.decode()
    assert "not acknowledged" in content
    assert f'action="{acknowledge_url(item)}"' in content and f'hx-post="{acknowledge_url(item)}"' in content
    assert 'hx-target="#acknowledgement"' in content


def test_pressing_acknowledge_stamps_it_and_returns_to_the_incident(sre_client):
    item = incident()
    response = sre_client.post(acknowledge_url(item))
    assert response.status_code == 302 and response.url == item.get_absolute_url()
    item.refresh_from_db()
    assert item.acknowledged_at is not None and lifecycle.acknowledged_by(item) == "sam"


def test_with_htmx_the_button_swaps_in_who_acknowledged_it(sre_client):
    item = incident()
    response = sre_client.post(acknowledge_url(item), **HTMX_HEADERS, HTTP_HX_TARGET="acknowledgement")
    content = response.content.decode()
    assert response.status_code == 200 and "<html" not in content
    assert 'id="acknowledgement"' in content and "Acknowledged by <strong>sam</strong>" in content


def test_the_page_says_who_acknowledged_it_when_and_after_how_long(viewer_client):
    item = incident()
    lifecycle.acknowledge(item, at=item.detected_at + timedelta(minutes=4, seconds=12), user="sam")
    content = viewer_client.get(item.get_absolute_url()).content.decode()
    moment = timezone.localtime(item.acknowledged_at).strftime("%Y-%m-%d %H:%M:%S")
    assert "Acknowledged by <strong>sam</strong>" in content and f"at {moment}" in content
    assert "(after 4 min 12 s)" in content and "not acknowledged" not in content


def test_a_viewer_sees_no_button_and_is_refused(viewer_client):
    item = incident()
    assert "Acknowledge</button>" not in viewer_client.get(item.get_absolute_url()).content.decode()
    assert viewer_client.post(acknowledge_url(item)).status_code == 403
    item.refresh_from_db()
    assert item.acknowledged_at is None


def test_acknowledging_a_resolved_incident_says_why_not(sre_client):
    item = incident(status="resolved", resolved_at=timezone.now())
    response = sre_client.post(acknowledge_url(item), follow=True)
    assert "is resolved: there is nothing left to acknowledge" in response.content.decode()
    partial = sre_client.post(acknowledge_url(item), **HTMX_HEADERS, HTTP_HX_TARGET="acknowledgement")
    assert 'role="alert"' in partial.content.decode()
    item.refresh_from_db()
    assert item.acknowledged_at is None


# The link in a notification ---------------------------------------------------------------------


def test_a_notification_links_to_a_confirm_page_that_changes_nothing(sre_client, settings):
    settings.CONSOLE_URL = "https://ops.example.com"
    item = incident()
    target = NotificationTarget(name="pager", url="https://hooks.example.com/x")
    link = delivery.payload(target=target, incident=item, event="opened")["incident"]["acknowledge_url"]
    assert link == f"https://ops.example.com{acknowledge_url(item)}"
    response = sre_client.get(urlsplit(link).path)
    content = response.content.decode()
    assert response.status_code == 200 and content.count("Acknowledge</button>") == 1
    assert f'method="post" action="{acknowledge_url(item)}"' in content
    item.refresh_from_db()
    assert item.acknowledged_at is None and not item.timeline.exists()


def test_the_confirm_page_acknowledges_on_post_and_returns_to_the_incident(sre_client):
    item = incident()
    response = sre_client.post(acknowledge_url(item))
    assert response.status_code == 302 and response.url == item.get_absolute_url()
    assert Incident.objects.get().acknowledged_at is not None


def test_the_link_asks_an_anonymous_visitor_to_log_in_and_come_back(client):
    item = incident()
    response = client.get(acknowledge_url(item))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))
    assert response.url.endswith("?next=" + acknowledge_url(item))


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"status": "resolved"}, "nothing left to acknowledge"),
        ({"acknowledged_at": timezone.now()}, "Already acknowledged"),
    ],
)
def test_the_confirm_page_offers_no_button_when_there_is_nothing_to_acknowledge(sre_client, fields, says):
    content = sre_client.get(acknowledge_url(incident(**fields))).content.decode()
    assert says in content and "Acknowledge</button>" not in content


# The API ----------------------------------------------------------------------------------------


@pytest.fixture
def api(cast):
    def client_for(role: str) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=cast.for_role(role)).key}")
        return client

    return client_for


def test_the_api_acknowledges_with_a_token_and_says_who_and_when(api):
    item = incident()
    response = api("sre").post(api_url(item.pk))
    item.refresh_from_db()
    assert response.status_code == 200
    assert response.json() == {
        "id": item.pk,
        "status": "open",
        "acknowledged_at": item.acknowledged_at.isoformat().replace("+00:00", "Z"),
        "acknowledged_by": "sam",
    }


def test_the_api_keeps_the_first_acknowledgement(api):
    item = incident()
    first = api("sre").post(api_url(item.pk)).json()
    again = api("admin").post(api_url(item.pk)).json()
    assert again == first


def test_the_api_refuses_a_resolved_incident_with_409(api):
    item = incident(status="resolved", resolved_at=timezone.now())
    response = api("sre").post(api_url(item.pk))
    assert response.status_code == 409
    message = f"Incident {item.pk} is resolved: there is nothing left to acknowledge."
    assert response.json() == {"error": message}


def test_the_api_answers_404_for_an_unknown_incident(api):
    response = api("sre").post(api_url(424242))
    assert response.status_code == 404 and "error" in response.json()


def test_the_api_needs_the_sre_role_and_a_login(api):
    item = incident()
    assert api("viewer").post(api_url(item.pk)).status_code == 403
    assert APIClient().post(api_url(item.pk)).status_code == 401
    assert Incident.objects.get().acknowledged_at is None
