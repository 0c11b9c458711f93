"""A walkthrough in a real browser: clicking an answer swaps in the next step without a page
load, the URL holds the path, and Back returns to the question."""

from __future__ import annotations

import pytest
from django.db import connections

from diagnostics.trees.model import trees
from tests.browser import OUTPUT_DIR, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_engineer_answers_step_by_step_and_goes_back(page, live_server, cast):
    guide = trees()["guide"]
    start = guide.node(guide.start)
    try:
        log_in(page, live_server, cast.engineer, "/troubleshoot/guide/")
        page.wait_for_selector("#walk .question")
        assert start.question in page.inner_text("#walk")
        page.evaluate("window.__sameDocument = true")
        page.click(f"#walk .answers a:has-text({start.answers[0].answer[:30]!r})")
        page.wait_for_function("location.search.includes('path=0')")
        page.wait_for_selector("#walk .steps li")
        assert page.evaluate("window.__sameDocument") is True
        assert start.answers[0].answer in page.inner_text("#walk .steps")
        page.click("#walk .actions a:has-text('Back')")
        page.wait_for_function("!location.search.includes('path=')")
        assert page.inner_text("#walk .steps").strip() == ""
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT_DIR / "walkthrough.png"), full_page=True)
    finally:
        connections.close_all()
