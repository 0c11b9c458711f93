"""In a real browser: the instance page's state changes without a reload when a fault is
injected, "probe now" shows each kind and then the result in place, the charts redraw in
place, and the page fits 1280x800 and 1920x1080 without sideways scrolling. Screenshots
go to test-output/."""

from __future__ import annotations

import pytest

from tests.browser import OUTPUT_DIR, log_in
from tests.fleet.probing import health_cycle_on_a_thread as health_cycle
from tests.fleet.probing import simulated_instances

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def shoot(page, name: str, width: int, height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_timeout(300)  # plotly's responsive charts resize on the window's resize
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, (name, width, overflow)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT_DIR / f"instance-{name}-{width}x{height}.png"), full_page=True)


def test_the_instance_page_follows_a_fault_and_a_probe_now_without_a_reload(
    page, live_server, cast, simulator, quick_settings, settings, celery_worker_thread
):
    settings.OVERVIEW_POLL_S = 1
    (instance,) = simulated_instances(1)
    sim = simulator()
    health_cycle()
    log_in(page, live_server, cast.engineer, instance.get_absolute_url())
    page.wait_for_selector('#instance-state[data-verdict="up"]')
    page.wait_for_selector("#charts div.chart .main-svg")
    page.evaluate("window.notReloaded = true")

    sim.inject(instance.name, {"kind": "refuse_connections"})
    sim.wait_listening(instance.name, listening=False)
    health_cycle()
    page.wait_for_selector('#instance-state[data-verdict="failing"]')
    assert "Connection refused" in page.inner_text("#instance-state")
    shoot(page, "failing", 1280, 800)

    sim.clear(instance.name)
    sim.wait_listening(instance.name)
    page.click("text=Probe now")
    page.wait_for_selector("#probe-run .probe-step")  # the kinds, as they finish
    page.wait_for_selector('#probe-run[data-status="done"]', timeout=40_000)
    kinds = page.eval_on_selector_all("#probe-run .probe-step", "els => els.map(e => e.dataset.kind)")
    assert sorted(kinds) == ["gpu", "health", "metrics", "stream"]
    page.wait_for_selector('#instance-state[data-verdict="up"]')
    assert page.locator("#probe-run .probe-step").count() == 4  # kept across the state's refresh
    page.wait_for_selector('#charts [data-panel="panel-2"] .main-svg')  # KV cache, from the metrics

    # A poll with the same charts draws into the plots already shown: same elements, no blank.
    plot = page.evaluate_handle("document.querySelector('#charts [data-panel=\"panel-2\"] div.chart')")
    page.evaluate("htmx.trigger(document.body, 'instance-probed')")
    page.wait_for_selector("#charts[data-refreshed-at]")
    assert page.evaluate(
        "p => p === document.querySelector('#charts [data-panel=\"panel-2\"] div.chart')", plot
    )
    assert page.evaluate("window.notReloaded") is True
    shoot(page, "probed", 1280, 800)
    shoot(page, "probed", 1920, 1080)
