"""In a real browser, as each role, at 1280x800 and 1920x1080: every page the console has
(lists, details, forms, tools, incidents, review, drills; for admin, the Django admin's
entry points) opens for the roles it is meant
for, no page scrolls sideways, no page logs a console error or fails a request, and no link
a role is shown answers 4xx or 5xx. Screenshots of every page land in test-output/pages/
(both widths as admin, who sees every element; 1280 for the other roles).

Once per page, as admin at 1280x800, each page also passes axe-core's serious and critical
rules and a keyboard walk (tests/a11y.py): a lesser role's page is the same templates with
controls left out (none shows a role something in place of what it hides), and the width
changes the layout, not the elements, so the other roles and the wide screen would only
repeat it. The header, the same on every page, is walked on the first page only.

Then every page again as admin at 1280x800 in a browser that asks for Chinese (zh-CN): it
is served in zh-hans, fits without sideways scrolling and logs no console error; the
screenshots land in test-output/pages-zh/."""

from __future__ import annotations

from urllib.parse import urldefrag, urlsplit

import pytest
from django.db import connections

from core.roles import Role
from tests.a11y import accessibility_problems, install_axe
from tests.browser import OUTPUT_DIR, log_in
from tests.pages import ADMIN_PAGES, make_fleet
from tests.pages import pages as all_pages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = {"1280": (1280, 800), "1920": (1920, 1080)}
A11Y_ROLE, A11Y_WIDTH = Role.ADMIN, "1280"  # where the accessibility checks run
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


def _shot_name(path: str) -> str:
    """/fleet/hosts/3/edit/ -> fleet_hosts_pk_edit (k8s stays k8s)."""
    parts = ["pk" if part.isdigit() else part for part in urlsplit(path).path.strip("/").split("/")]
    return "_".join(parts) or "home"


@pytest.mark.parametrize(
    "role", [Role.VIEWER, Role.ENGINEER, Role.SRE, Role.ADMIN], ids=lambda r: r.group_name
)
def test_every_page_opens_for_its_roles_fits_both_widths_and_links_only_where_it_may(
    page, live_server, cast, role
):
    try:
        sweep(page, live_server, cast, role)
    finally:
        # The ORM calls made while Playwright runs open a connection in a context that
        # pytest-django does not see; close it so the test database can be dropped.
        connections.close_all()


def sweep(page, live_server, cast, role):
    pages = all_pages(make_fleet())
    user = cast.for_role(role.group_name)
    if role == Role.ADMIN:  # bootstrap makes the admin user staff: the admin's pages too
        user.is_staff = user.is_superuser = True
        user.save()
        pages |= dict.fromkeys(ADMIN_PAGES, Role.ADMIN)
    log_in(page, live_server, user, "/")
    page.wait_for_load_state("networkidle")
    origin = live_server.url
    problems = _watch(page)
    shown: set[str] = set()
    out = OUTPUT_DIR / "pages"
    out.mkdir(parents=True, exist_ok=True)
    if role == A11Y_ROLE:
        install_axe(page.context)
    inaccessible: dict[str, list[str]] = {}
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
            if role == Role.ADMIN or width == "1280":
                shot = out / f"{role.group_name}-{width}-{_shot_name(path)}.png"
                page.screenshot(path=str(shot), full_page=True)
            shown |= _links(page, origin)
            if role == A11Y_ROLE and width == A11Y_WIDTH:
                # the header, the same on every page, is walked on the first page only
                inaccessible[path] = accessibility_problems(page, start="main" if inaccessible else "body")
    broken = []
    for url in sorted(shown):
        answer = page.request.get(url, max_redirects=0)
        if answer.status >= 400:
            broken.append(f"{answer.status} {url}")
    assert not broken, f"links shown to {role.group_name} that fail: {broken}"
    failing = {path: lines for path, lines in inaccessible.items() if lines}
    assert not failing, "accessibility problems:\n" + "\n".join(
        f"{path}:\n  " + "\n  ".join(lines) for path, lines in failing.items()
    )


def test_every_page_in_chinese_is_zh_hans_fits_and_logs_no_error(zh_page, live_server, cast):
    try:
        sweep_in_chinese(zh_page, live_server, cast)
    finally:
        connections.close_all()


def sweep_in_chinese(page, live_server, cast):
    pages = all_pages(make_fleet())
    log_in(page, live_server, cast.admin, "/")
    page.wait_for_load_state("networkidle")
    problems = _watch(page)
    out = OUTPUT_DIR / "pages-zh"
    out.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 800})
    wrong = []
    for path in pages:
        problems.clear()
        response = page.goto(live_server.url + path, wait_until="load")
        status = response.status if response else None
        lang = page.evaluate("document.documentElement.lang")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        page.screenshot(path=str(out / f"admin-1280-{_shot_name(path)}.png"), full_page=True)
        if status != 200 or lang != "zh-hans" or overflow > 0 or problems:
            wrong.append(f"{path}: status {status}, lang {lang!r}, sideways {overflow} px, {problems}")
    assert not wrong, "\n".join(wrong)
