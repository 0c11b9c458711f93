"""The real browser for the browser tests: Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
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


def chromium_path() -> str | None:
    return os.environ.get("OPS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def page(monkeypatch, live_server):  # the browser closes before the live server stops
    from playwright import sync_api  # a dev dependency: missing is a failure, not a skip

    executable = chromium_path()
    require_service("Chromium", executable is not None, "apt-get install chromium (make test does)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls made by the
    # test itself are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        yield context.new_page()
        browser.close()


def log_in(page, live_server, user, path: str) -> None:
    """Open `path`, which sends the browser to the login form, and sign in as `user`."""
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}{path}")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
