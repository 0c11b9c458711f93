"""Each role sees only the sections it can use; a page it cannot open, a missing page and a
server error are explained inside the console's layout, not by Django's bare pages."""

import pytest
from django.urls import reverse

from tests.factories import make_host, make_instance

pytestmark = pytest.mark.django_db


def _nav(content: str) -> str:
    return content.split('<nav class="mainnav"', 1)[1].split("</nav>", 1)[0]


def test_a_viewer_sees_only_the_sections_a_viewer_can_open(viewer_client):
    nav = _nav(viewer_client.get(reverse("fleet:overview")).content.decode())
    assert "Fleet" in nav and "Incidents" in nav and "Troubleshoot" in nav and "Drills" in nav
    assert "Sizing" not in nav and "Configs" not in nav


def test_an_engineer_sees_the_tools_too(client, cast):
    client.force_login(cast.engineer)
    nav = _nav(client.get(reverse("fleet:overview")).content.decode())
    assert "Sizing" in nav and "Configs" in nav


def test_a_viewer_is_shown_no_button_that_leads_to_a_refusal(viewer_client):
    instance = make_instance(make_host(), name="chat-a")
    page = viewer_client.get(instance.get_absolute_url()).content.decode()
    assert "Size this instance" not in page and "Launch config" not in page
    assert "Open an incident" not in viewer_client.get(reverse("incidents:index")).content.decode()
    assert "Triage a log" not in viewer_client.get(reverse("diagnostics:troubleshoot")).content.decode()


def test_a_refused_page_is_explained_inside_the_layout(viewer_client):
    response = viewer_client.get(reverse("diagnostics:sizing"))
    content = response.content.decode()
    assert response.status_code == 403
    assert '<nav class="mainnav"' in content and "Your role cannot open this page" in content


def test_a_missing_page_is_explained_inside_the_layout(viewer_client):
    response = viewer_client.get("/fleet/instances/999999/")
    content = response.content.decode()
    assert response.status_code == 404
    assert '<nav class="mainnav"' in content and "Nothing here" in content


def test_a_server_error_page_renders_without_a_request_or_context():
    from django.template.loader import render_to_string

    html = render_to_string("500.html")
    assert "The console failed on this page" in html and 'href="/healthz"' in html


def test_the_browser_s_favicon_request_finds_the_icon(client):
    response = client.get("/favicon.ico", follow=True)
    assert response.status_code == 200 and response.redirect_chain[0][0].endswith("favicon.svg")
