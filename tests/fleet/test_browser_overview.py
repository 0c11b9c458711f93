"""In a real browser: the overview's tile of an instance whose port starts refusing goes
amber (failing) at the first failed health run, red (down) once it failed N runs in a row,
and green again after the fault is cleared; the per-state counts in the same partial agree
with the tiles at each step. Screenshots of each step go to test-output/."""

from __future__ import annotations

import pytest

from tests.browser import OUTPUT_DIR, log_in
from tests.fleet.probing import health_cycle_on_a_thread as health_cycle
from tests.fleet.probing import simulated_instances

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

COLOURS = {"up": "rgb(26, 123, 81)", "failing": "rgb(180, 72, 0)", "down": "rgb(192, 57, 43)"}


def _tile(page, name: str):
    return page.locator(f'a.tile[data-instance="{name}"]')


def _see(page, name: str, state: str, step: str) -> None:
    tile = _tile(page, name)
    page.wait_for_selector(f'a.tile[data-instance="{name}"][data-state="{state}"]', timeout=15_000)
    colour = tile.evaluate("el => getComputedStyle(el).borderLeftColor")
    assert colour == COLOURS[state], (state, colour)
    assert page.locator(f'.state-filter .count[data-state="{state}"]').inner_text() == "1"
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT_DIR / f"overview-{step}-{state}.png"), full_page=True)


def test_a_refusing_instance_goes_amber_then_red_and_back_to_green(
    page, live_server, cast, simulator, quick_settings, settings
):
    settings.OVERVIEW_POLL_S = 1
    (instance,) = simulated_instances(1)
    sim = simulator()
    health_cycle()
    log_in(page, live_server, cast.viewer, "/fleet/")
    _see(page, instance.name, "up", "1")

    sim.inject(instance.name, {"kind": "refuse_connections"})
    sim.wait_listening(instance.name, listening=False)
    health_cycle()
    _see(page, instance.name, "failing", "2")
    assert "failing 1× in a row" in _tile(page, instance.name).inner_text()
    assert "Connection refused" in _tile(page, instance.name).inner_text()

    health_cycle()  # quick_settings: down after 2 failed runs
    _see(page, instance.name, "down", "3")

    sim.clear(instance.name)
    sim.wait_listening(instance.name)
    health_cycle()
    _see(page, instance.name, "up", "4")
