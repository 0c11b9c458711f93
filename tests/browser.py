"""The real browser for the browser tests: Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import PASSWORD, require_service

OUTPUT_DIR = Path(os.environ.get("OPS_TEST_OUTPUT", Path(__file__).resolve().parents[1] / "test-output"))
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def cjk_font_installed() -> bool:
    """Whether fontconfig knows a font with Chinese glyphs (Chromium draws boxes without)."""
    try:
        found = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return bool(found.stdout.strip())


def chromium_path() -> str | None:
    return os.environ.get("OPS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def _browser_page(monkeypatch=None, **context_options):
    from playwright import sync_api  # a dev dependency: missing is a failure, not a skip

    executable = chromium_path()
    require_service("Chromium", executable is not None, "apt-get install chromium (make test does)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls made by the
    # test itself are still synchronous.
    if monkeypatch is not None:
        monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900}, **context_options)
        yield context.new_page()
        browser.close()


@pytest.fixture
def page(monkeypatch, live_server):  # the browser closes before the live server stops
    with _browser_page(monkeypatch) as opened:
        yield opened


@pytest.fixture(scope="module")
def bare_page():
    """A page with no server and no database behind it, for checks on set_content(); one
    browser for the module."""
    with _browser_page() as opened:
        yield opened


@pytest.fixture
def zh_page(monkeypatch, live_server):
    """A page whose browser asks for Chinese: its Accept-Language is zh-CN."""
    require_service("A CJK font", cjk_font_installed(), "apt-get install fonts-noto-cjk (make tools does)")
    with _browser_page(monkeypatch, locale="zh-CN") as opened:
        yield opened


def log_in(page, live_server, user, path: str) -> None:
    """Open `path`, which sends the browser to the login form, and sign in as `user`."""
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}{path}")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    # the sign-in form's own button: the header's language switcher has submit buttons too
    page.click("form:has(#id_password) button[type=submit]")
