"""A config generator in a real browser: typing in a field swaps in the new preview over
HTMX, the URL follows, and Copy puts the file on the clipboard."""

from __future__ import annotations

import pytest
from django.db import connections

from tests.browser import OUTPUT_DIR, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_engineer_types_a_rate_and_the_nginx_preview_follows(page, live_server, cast):
    try:
        log_in(page, live_server, cast.engineer, "/configs/nginx/?preset=balanced")
        page.wait_for_selector("#preview pre.config")
        assert "rate=30r/s" in page.inner_text("#preview")

        page.evaluate("window.__sameDocument = true")
        with page.expect_response(
            lambda r: "rate_per_ip=45" in r.url and r.request.headers.get("hx-request")
        ):
            page.fill("#id_rate_per_ip", "45")
        page.wait_for_function("document.querySelector('#preview').innerText.includes('rate=45r/s')")
        assert page.evaluate("window.__sameDocument") is True
        assert "rate_per_ip=45" in page.url and "preset=balanced" in page.url

        page.fill("#id_burst_per_ip", "9;")
        page.wait_for_function("document.querySelector('#preview').innerText.includes('Fix these first')")
        assert "burst_per_ip" in page.inner_text("#preview")
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT_DIR / "configs-nginx.png"), full_page=True)
    finally:
        connections.close_all()
