"""One real browser walk through the inventory: Debian's Chromium driven by Playwright.

Logs in, adds a host and an instance through the forms, then filters the host list and
checks that only the results partial changed (no full page load) and the URL followed.
"""

from __future__ import annotations

import pytest
from django.db import connections

from fleet.models import GpuHost, Instance
from tests.browser import OUTPUT_DIR, log_in
from tests.factories import make_host

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_sre_adds_a_host_and_an_instance_then_filters_the_list_live(page, live_server, cast):
    try:
        walk_through(page, live_server, cast)
    finally:
        # The ORM calls made while Playwright runs open a connection in a context that
        # pytest-django does not see; close it so the test database can be dropped.
        connections.close_all()


def walk_through(page, live_server, cast):
    make_host(name="other-node-01", address="10.9.0.1")
    page.set_default_timeout(15_000)
    log_in(page, live_server, cast.sre, "/fleet/hosts/")
    page.wait_for_url("**/fleet/hosts/")

    page.click("text=Add GPU host")
    page.fill("#id_name", "gpu-browser-01")
    page.fill("#id_address", "10.7.0.1")
    page.fill("#id_tags", "prod, h100")
    page.fill("#id_numa_nodes", "2")
    page.click("button.primary[type=submit]")
    page.wait_for_selector("h1:has-text('gpu-browser-01')")
    assert GpuHost.objects.get(name="gpu-browser-01").tags == ["h100", "prod"]

    page.click("text=Add an instance")
    page.fill("#id_name", "vllm-browser")
    page.fill("#id_base_url", "http://10.7.0.1:8000")
    page.fill("#id_served_model_name", "Qwen/Qwen3-8B")
    page.click("button.primary[type=submit]")
    page.wait_for_selector("h1:has-text('vllm-browser')")
    assert Instance.objects.get(name="vllm-browser").host.name == "gpu-browser-01"

    page.goto(f"{live_server.url}/fleet/hosts/")
    page.evaluate("window.__sameDocument = true")
    with page.expect_response(
        lambda r: "q=browser" in r.url and r.request.headers.get("hx-request") == "true"
    ):
        page.fill("input[type=search]", "browser")
    page.wait_for_function("!document.querySelector('#results').textContent.includes('other-node-01')")
    assert page.evaluate("window.__sameDocument") is True  # the partial swapped in, no page load
    assert "q=browser" in page.url  # pushed, so the filtered view can be shared
    assert "gpu-browser-01" in page.inner_text("#results")

    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT_DIR / "inventory-filtered.png"), full_page=True)
