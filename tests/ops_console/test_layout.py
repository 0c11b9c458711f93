"""The base layout: navigation, and every asset served by the console itself (air-gapped)."""

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

ASSET_RE = re.compile(r'<(?:script|link)[^>]+(?:src|href)="([^"]+)"')


def test_the_navigation_has_every_section_for_an_engineer(client, cast):
    client.force_login(cast.engineer)
    content = client.get(reverse("home")).content.decode()
    for label in ["Fleet", "Incidents", "Troubleshoot", "Sizing", "Configs", "Drills"]:
        assert f">{label}</a>" in content


@pytest.mark.parametrize("url_name", ["home", "fleet:host-list", "fleet:host-create", "api-docs"])
def test_pages_load_only_local_assets_and_they_are_served(cast, url_name, client):
    client.force_login(cast.sre)
    content = client.get(reverse(url_name)).content.decode()
    assets = ASSET_RE.findall(content)
    assert assets, "expected scripts and stylesheets"
    for asset in assets:
        assert asset.startswith("/"), f"{asset} is not served locally"
        assert client.get(asset).status_code == 200, asset


def test_the_overview_draws_a_plotly_chart_once_there_are_gpus(viewer_client):
    from tests.factories import make_gpu, make_host

    make_gpu(make_host(name="chart-host"))
    content = viewer_client.get(reverse("home")).content.decode()
    assert "vendor/plotly.min.js" in content and 'id="memory-figure"' in content
    assert "chart-host" in content


def test_the_overview_of_an_empty_fleet_says_how_to_start(viewer_client):
    content = viewer_client.get(reverse("home")).content.decode()
    assert "No GPU hosts yet" in content and "demo_fleet" in content
