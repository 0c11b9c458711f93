"""In a real browser at 1280x800: a pasted access log with a 429 spike answers with its story
above the fold (the headline naming the client), the chart drawn beside it, the top talkers
right after, "show all" opening the folded talkers, and nothing wider than the window.
Screenshots go to test-output/."""

from __future__ import annotations

import pytest

from tests.browser import OUTPUT_DIR, log_in
from tests.triage import access_logs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH, HEIGHT = 1280, 800


def _no_sideways_scroll(page) -> None:
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], f"the page scrolls sideways: {widths}"


def _paste(page, live_server, user, text: str) -> None:
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    log_in(page, live_server, user, "/troubleshoot/triage/")
    page.fill("#id_text", text)
    page.click("#triage-form button[type=submit]")
    page.wait_for_selector("#story-headline")


def test_the_429_story_is_above_the_fold_at_1280_by_800(page, live_server, cast):
    _paste(page, live_server, cast.engineer, access_logs.rate_limit_spike())
    headline = page.locator("#story-headline")
    assert "10.0.3.7" in headline.inner_text() and "429" in headline.inner_text()
    box = headline.bounding_box()
    assert box is not None and box["y"] + box["height"] < HEIGHT, box
    page.wait_for_selector("#access-story .chart .main-svg")  # plotly drew the status classes
    chart = page.locator("#access-story .chart").bounding_box()
    assert chart is not None and chart["y"] < HEIGHT
    assert page.locator(".talkers").bounding_box()["y"] < page.locator(".section-title").bounding_box()["y"]
    _no_sideways_scroll(page)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT_DIR / "triage-429-story-1280x800.png"))
    page.screenshot(path=str(OUTPUT_DIR / "triage-429-story-full.png"), full_page=True)

    hidden = page.locator(".talkers tbody.more-rows tr").first
    assert not hidden.is_visible()
    page.locator(".talkers details.show-all summary").first.click()
    assert hidden.is_visible()
    page.locator(".matches details.show-all summary").click()
    _no_sideways_scroll(page)
    page.screenshot(path=str(OUTPUT_DIR / "triage-429-story-opened-full.png"), full_page=True)


def test_a_clean_log_says_so_above_the_fold(page, live_server, cast):
    _paste(page, live_server, cast.engineer, access_logs.clean())
    headline = page.locator("#story-headline")
    assert headline.inner_text().startswith("Nothing wrong")
    assert headline.bounding_box()["y"] < HEIGHT
    _no_sideways_scroll(page)
    page.screenshot(path=str(OUTPUT_DIR / "triage-clean-1280x800.png"))
