"""In a real browser, as each role, at 1280x800 and 1920x1080: every page the console has
(lists, details, forms, tools, incidents, review, drills) opens for the roles it is meant
for, no page scrolls sideways, no page logs a console error or fails a request, and no link
a role is shown answers 4xx or 5xx. Screenshots of every page land in test-output/pages/."""

from __future__ import annotations

import re
from urllib.parse import urldefrag, urlsplit

import pytest

from core.roles import Role
from tests.browser import OUTPUT_DIR, log_in
from tests.pages import make_fleet
from tests.pages import pages as all_pages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = {"1280": (1280, 800), "1920": (1920, 1080)}
# Links that download, leave the console or end the session are not followed.
NOT_FOLLOWED = ("/accounts/logout/", "/admin/", "/api/", "/fleet/export/", ".csv", ".tar.gz", "/static/")


def _watch(page) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    # ERR_ABORTED is a request cut short by the next navigation; real failures are kept.
    page.on(
        "requestfailed",
        lambda r: "ERR_ABORTED" not in (r.failure or "") and problems.append(f"failed: {r.url} {r.failure}"),
    )
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status}: {r.url}"))
    return problems


def _links(page, origin: str) -> set[str]:
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    links = set()
    for href in hrefs:
        url = urldefrag(href).url
        if url.startswith(origin) and not any(part in url for part in NOT_FOLLOWED):
            links.add(url)
    return links


@pytest.mark.parametrize(
    "role", [Role.VIEWER, Role.ENGINEER, Role.SRE, Role.ADMIN], ids=lambda r: r.group_name
)
def test_every_page_opens_for_its_roles_fits_both_widths_and_links_only_where_it_may(
    page, live_server, cast, role
):
    pages = all_pages(make_fleet())
    user = cast.for_role(role.group_name)
    log_in(page, live_server, user, "/")
    page.wait_for_load_state("networkidle")
    origin = live_server.url
    problems = _watch(page)
    shown: set[str] = set()
    out = OUTPUT_DIR / "pages"
    out.mkdir(parents=True, exist_ok=True)
    for width, (w, h) in WIDTHS.items():
        page.set_viewport_size({"width": w, "height": h})
        for path, least in pages.items():
            allowed = role >= least
            problems.clear()
            response = page.goto(origin + path, wait_until="load")
            status = response.status if response else None
            if not allowed:
                assert status == 403, (role, path, status)
                continue
            assert status == 200, (role, path, status)
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{path} scrolls sideways by {overflow} px at {width} as {role.group_name}"
            assert not problems, (role, path, width, problems)
            name = re.sub(r"\d+", "pk", urlsplit(path).path.strip("/").replace("/", "_")) or "home"
            page.screenshot(path=str(out / f"{role.group_name}-{width}-{name}.png"), full_page=True)
            shown |= _links(page, origin)
    broken = []
    for url in sorted(shown):
        answer = page.request.get(url, max_redirects=0)
        if answer.status >= 400:
            broken.append(f"{answer.status} {url}")
    assert not broken, f"links shown to {role.group_name} that fail: {broken}"
