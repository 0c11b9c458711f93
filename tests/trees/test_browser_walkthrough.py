"""A walkthrough in a real browser: clicking an answer swaps in the next step without a page
load, the URL holds the path, and Back returns to the question."""

from __future__ import annotations

import pytest
from django.db import connections

from diagnostics.trees.model import trees
from diagnostics.trees.walk import walk
from fleet import probe_service
from tests.browser import OUTPUT_DIR, log_in
from tests.fleet.probing import simulated_instances

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


def deep_path(tree_id: str, depth: int) -> list[int]:
    """A path of `depth` answers ending at a question whose second answer leads to another question."""

    def search(path: list[int]) -> list[int] | None:
        result = walk(trees(), tree_id, path)
        if result.finished or result.problem:
            return None
        if len(path) >= depth:
            nxt = walk(trees(), tree_id, [*path, 1])
            return path if not nxt.finished and not nxt.problem else None
        for index in range(len(result.current.answers)):
            found = search([*path, index])
            if found is not None:
                return found
        return None

    found = search([])
    assert found is not None
    return found


FOCUS_IN_QUESTION = "document.activeElement.closest('#walk .question .answers') !== null"


def test_a_keyboard_user_answers_two_questions_and_stays_at_the_new_question(page, live_server, cast):
    path = deep_path("guide", 6)
    start = ".".join(map(str, path))
    try:
        page.set_viewport_size({"width": 1280, "height": 800})
        log_in(page, live_server, cast.engineer, f"/troubleshoot/guide/?path={start}")
        page.wait_for_selector("#walk .question")
        page.wait_for_function(FOCUS_IN_QUESTION)  # the first answer has the focus on arrival
        page.keyboard.press("Tab")  # to the second answer
        second = walk(trees(), "guide", path).current.answers[1].answer
        assert page.evaluate("document.activeElement.textContent.trim()") == second
        page.keyboard.press("Enter")
        page.wait_for_function(f"location.search.includes('path={start}.1')")
        page.wait_for_function(FOCUS_IN_QUESTION)
        after_first = page.evaluate("window.scrollY")
        question = walk(trees(), "guide", [*path, 1]).current
        assert question.question in page.inner_text("#walk .question h2")
        assert page.evaluate("document.activeElement.textContent.trim()") == question.answers[0].answer
        page.keyboard.press("Enter")  # the new question's first answer
        page.wait_for_function(f"location.search.includes('path={start}.1.0')")
        page.wait_for_function(
            "document.activeElement.closest('#walk .question .answers, #walk .leaf') !== null"
        )
        assert after_first > 0 and page.evaluate("window.scrollY") > 0  # not back at the top
        in_view = page.evaluate(
            "(() => { const r = document.activeElement.getBoundingClientRect();"
            " return r.top >= 0 && r.bottom <= window.innerHeight; })()"
        )
        assert in_view
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT_DIR / "walkthrough-keyboard.png"))
    finally:
        connections.close_all()


@pytest.fixture
def refusing_instance(transactional_db, simulator, quick_settings):
    """Probed before the browser starts: the probes run their own event loop, Playwright too."""
    (instance,) = simulated_instances(1)
    sim = simulator()
    sim.inject(instance.name, {"kind": "refuse_connections"})
    sim.wait_listening(instance.name, listening=False)
    for kind in ("health", "stream", "metrics", "gpu"):
        probe_service.run_cycle(kind=kind)
    return instance


def test_from_a_refusing_instance_the_probes_answer_and_the_commands_point_at_it(
    refusing_instance, page, live_server, cast
):
    instance = refusing_instance
    try:
        page.set_viewport_size({"width": 1280, "height": 800})
        log_in(page, live_server, cast.engineer, f"/troubleshoot/instances/{instance.pk}/")
        page.wait_for_selector("#walk .question")
        first = page.inner_text("#walk .steps li:first-child")
        assert f"answered from {instance.name}'s probes:" in first and "Connection refused" in first
        page.click("#walk .steps li:first-child summary")
        page.click("details.corrections summary")
        assert "Guide §" in page.inner_text("details.corrections")
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT_DIR / "walkthrough-instance.png"), full_page=True)
        page.goto(f"{live_server.url}/troubleshoot/timeouts/?instance={instance.pk}&path=2")
        page.wait_for_selector("#walk .question pre")
        assert instance.base_url in page.inner_text("#walk .question pre")
        assert "HOST:8000" not in page.inner_text("#walk")
        page.screenshot(path=str(OUTPUT_DIR / "walkthrough-instance-command.png"))
    finally:
        connections.close_all()
