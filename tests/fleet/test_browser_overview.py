"""In a real browser: a host whose instances are all up is one chip with its count; when one
instance's port starts refusing, its tile appears amber (failing) at the first failed health
run beside its host's quiet other, turns red (down) once it failed N runs in a row, and the
host folds back into a chip after the fault is cleared. Each change arrives as a poll answer
that swaps only what changed (the #tiles element itself stays), the per-state counts agree
at each step, and the chip opens the host's tiles. Screenshots of each step go to
test-output/."""

from __future__ import annotations

import pytest

from tests.browser import OUTPUT_DIR, log_in
from tests.fleet.probing import health_cycle_on_a_thread as health_cycle
from tests.fleet.probing import simulated_instances

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

COLOURS = {"up": "rgb(26, 123, 81)", "failing": "rgb(180, 72, 0)", "down": "rgb(192, 57, 43)"}
CHIP = 'a.host-chip[data-host="sim-host"]'


def _tile(page, name: str):
    return page.locator(f'a.tile[data-instance="{name}"]')


def _count(page, state: str) -> str:
    return page.locator(f'.state-filter .count[data-state="{state}"]').inner_text()


def _shot(page, step: str) -> None:
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT_DIR / f"overview-{step}.png"), full_page=True)


def _see(page, name: str, state: str, step: str) -> None:
    page.wait_for_selector(f'a.tile[data-instance="{name}"][data-state="{state}"]', timeout=15_000)
    colour = _tile(page, name).evaluate("el => getComputedStyle(el).borderLeftColor")
    assert colour == COLOURS[state], (state, colour)
    assert _count(page, state) == "1" and _count(page, "up") == "1"
    assert page.locator("a.tile.quiet-others").inner_text().startswith("1 more, up")
    _shot(page, f"{step}-{state}")


def _see_collapsed(page, step: str) -> None:
    page.wait_for_selector(CHIP, timeout=15_000)
    assert page.locator("a.tile[data-instance]").count() == 0
    assert page.locator(f"{CHIP} .count").inner_text() == "2" and _count(page, "up") == "2"
    _shot(page, f"{step}-collapsed")


def test_a_refusing_instance_shows_amber_then_red_and_folds_back_into_its_healthy_host(
    page, live_server, cast, simulator, quick_settings, settings
):
    settings.OVERVIEW_POLL_S = 1
    broken, quiet = simulated_instances(2)
    sim = simulator()
    health_cycle()
    polls = []
    page.on("response", lambda r: polls.append(r.status) if "since=" in r.url else None)
    log_in(page, live_server, cast.viewer, "/fleet/")
    _see_collapsed(page, "1")
    page.evaluate("document.getElementById('tiles').dataset.kept = 'yes'")

    sim.inject(broken.name, {"kind": "refuse_connections"})
    sim.wait_listening(broken.name, listening=False)
    health_cycle()
    _see(page, broken.name, "failing", "2")
    assert "failing 1× in a row" in _tile(page, broken.name).inner_text()
    assert "Connection refused" in _tile(page, broken.name).inner_text()

    health_cycle()  # quick_settings: down after 2 failed runs
    _see(page, broken.name, "down", "3")
    page.wait_for_timeout(2_500)  # a poll or two with nothing new
    assert 204 in polls, polls
    assert (
        page.evaluate("document.getElementById('tiles').dataset.kept") == "yes"
    )  # pieces swapped, not #tiles

    sim.clear(broken.name)
    sim.wait_listening(broken.name)
    health_cycle()
    _see_collapsed(page, "4")

    page.locator(CHIP).click()
    page.wait_for_selector(f'a.tile[data-instance="{quiet.name}"][data-state="up"]', timeout=15_000)
    assert page.url.endswith("/fleet/?host=sim-host")
    assert _tile(page, broken.name).get_attribute("data-state") == "up"
    _shot(page, "5-host-opened")
