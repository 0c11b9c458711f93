"""In a real browser: the home page during an outage fits a laptop and a wall screen without
sideways scrolling, picks up a new incident by polling, and its links lead on. Screenshots
of the outage at 1280x800 and 1920x1080 go to test-output/."""

from __future__ import annotations

import re

import pytest
from django.db import connections

from incidents.models import Incident
from tests.browser import OUTPUT_DIR, log_in
from tests.ops_console.test_home import build_outage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = ((1280, 800), (1920, 1080))


def test_the_outage_fits_the_screen_refreshes_itself_and_links_on(page, live_server, cast, settings):
    try:
        walk_through(page, live_server, cast, settings)
    finally:
        # The ORM calls made while Playwright runs open a connection in a context that
        # pytest-django does not see; close it so the test database can be dropped.
        connections.close_all()


def walk_through(page, live_server, cast, settings):
    settings.OVERVIEW_POLL_S = 1
    outage = build_outage()
    log_in(page, live_server, cast.viewer, "/")
    page.wait_for_selector("#chart-memory .main-svg")
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(300)  # the chart redraws at the new width
        overflow = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert overflow[0] <= overflow[1], (width, overflow)
        page.screenshot(path=str(OUTPUT_DIR / f"home-outage-{width}x{height}.png"), full_page=True)
    states = page.locator("#instances [data-state]").evaluate_all("els => els.map(e => e.dataset.state)")
    assert states == ["down", "failing", "stale"]

    Incident.objects.create(title="GPU 3 fell off the bus", category="other", severity="critical")
    page.wait_for_selector("#incidents >> text=GPU 3 fell off the bus", timeout=10_000)
    assert page.locator('[data-count="incidents"]').inner_text() == "3"

    page.click(f'[data-incident="{outage.critical.pk}"] a.home-item-title')
    page.wait_for_url(re.compile(rf"/incidents/{outage.critical.pk}/$"))
    assert "llama-70b is down" in page.content()
