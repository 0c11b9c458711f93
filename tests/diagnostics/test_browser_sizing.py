"""The sizing page in a real browser: an input change swaps in new results over HTMX, the
URL follows (so the result can be shared) and plotly draws the concurrency chart."""

from __future__ import annotations

import pytest
from django.db import connections

from tests.browser import OUTPUT_DIR, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_engineer_changes_the_context_length_and_the_results_follow(page, live_server, cast):
    try:
        log_in(
            page,
            live_server,
            cast.engineer,
            "/sizing/?model=qwen3-8b&gpu=l40s&max_model_len=32768&vllm_version=0.11",
        )
        page.wait_for_selector("#results .verdict")
        assert "Maximum concurrency for 32,768 tokens" in page.inner_text("#results")
        page.wait_for_selector("#results .chart .main-svg")  # plotly drew the chart

        page.evaluate("window.__sameDocument = true")
        with page.expect_response(
            lambda r: "max_model_len=8192" in r.url and r.request.headers.get("hx-request")
        ):
            page.fill("#id_max_model_len", "8192")
        page.wait_for_function(
            "document.querySelector('#results').innerText.includes('8,192 tokens per request')"
        )
        assert page.evaluate("window.__sameDocument") is True
        assert "max_model_len=8192" in page.url
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT_DIR / "sizing.png"), full_page=True)
    finally:
        connections.close_all()
