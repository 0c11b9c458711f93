"""The accessibility checks themselves (tests/a11y.py), on small pages made for them: the
keyboard walk finds a trap, a stuck focus and a focus that does not show, and lets a form
of date fields through; axe-core, served from tests/vendor, reports serious violations.
test_browser_every_page.py runs the checks on every page of the console."""

from __future__ import annotations

import pytest

from tests.a11y import axe_violations, keyboard_problems

pytestmark = pytest.mark.browser

LINKS = "<a href='#a'>a</a> <a id='b' href='#b'>b</a> <a href='#c'>c</a> <a id='d' href='#d'>d</a>"


def _on_tab_at_b(script: str) -> str:
    return (
        "<script>document.getElementById('b').addEventListener('keydown', e => {"
        f" if (e.key === 'Tab') {{ e.preventDefault(); {script} }} }});</script>"
    )


def test_the_keyboard_walk_finds_traps_and_hidden_focus(bare_page):
    bare_page.set_content(LINKS + _on_tab_at_b("document.querySelector('a').focus();"))
    [problem] = keyboard_problems(bare_page)
    assert problem.startswith("keyboard trap") and "circled" in problem and 'a#d "d"' in problem, problem

    bare_page.set_content(LINKS + _on_tab_at_b(""))
    [problem] = keyboard_problems(bare_page)
    assert problem.startswith("keyboard trap") and "stopped moving" in problem, problem
    assert problem.endswith("""last on ['a "a"', 'a#b "b"']"""), problem

    bare_page.set_content(LINKS.replace("id='d'", "id='d' style='outline:none'"))
    assert keyboard_problems(bare_page) == ["focus not visible (no outline or box shadow) on ['a#d \"d\"']"]


def test_the_keyboard_walk_passes_date_fields_and_can_start_at_main(bare_page):
    fields = "".join(f"<input type='datetime-local' aria-label='at {n}'>" for n in range(4))
    bare_page.set_content(f"<header><a href='#h'>h</a></header><main>{fields}<button>Save</button></main>")
    assert keyboard_problems(bare_page) == []
    assert keyboard_problems(bare_page, start="main") == []


def test_axe_reports_serious_and_critical_violations_only(bare_page):
    bare_page.set_content(
        "<html lang='en'><title>t</title><main><h1>t</h1><img src='data:,'>"
        "<p style='color:#ccc'>pale</p><h3>skips a level (moderate)</h3></main>"
    )
    found = axe_violations(bare_page)
    assert [line.split(" ")[0] for line in found] == ["color-contrast", "image-alt"], found
    assert "#ccc" not in found[0] and "element(s), e.g. ['p']" in found[0], found
