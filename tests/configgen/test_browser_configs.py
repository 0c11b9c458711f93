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


LONG_NGINX = (
    "server {\n  listen 80;\n  location /v1/ {\n"
    "    proxy_pass http://a-very-long-upstream-name-for-a-gateway-that-goes-on-and-on.internal.example:8000;\n"
    "    add_header X-Explain 'a header whose value is long enough to be wider than any window at all, "
    "and then some more words to be sure of it, and more';\n  }\n}\n"
)


def _config_pages() -> list[str]:
    from diagnostics.configgen import registry

    return ["/configs/", *(f"/configs/{key}/" for key in registry.GENERATORS), "/configs/nginx/lint/"]


def _fits(page, name: str) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.evaluate("window.innerWidth"), (name, width)


@pytest.mark.parametrize("size", [(1280, 800), (1920, 1080)])
def test_no_config_page_scrolls_sideways(page, live_server, cast, size):
    from tests.factories import make_host, make_instance

    make_instance(make_host(), name="chat-wide", served_model_name="meta-llama/Llama-3.1-70B-Instruct")
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    try:
        page.set_viewport_size({"width": size[0], "height": size[1]})
        log_in(page, live_server, cast.engineer, "/configs/")
        for path in _config_pages():
            page.goto(f"{live_server.url}{path}")
            name = path.strip("/").replace("/", "-")
            _fits(page, name)
            page.screenshot(path=str(OUTPUT_DIR / f"{name}-{size[0]}.png"), full_page=True)
        page.fill("#id_text", LONG_NGINX)
        page.click("form.lint-form button[type=submit]")
        page.wait_for_selector(".finding pre.fix")
        _fits(page, "lint findings")
        page.screenshot(path=str(OUTPUT_DIR / f"configs-nginx-lint-findings-{size[0]}.png"), full_page=True)
    finally:
        connections.close_all()


def test_an_engineer_fills_the_kubernetes_form_from_an_instance_by_keyboard_and_mouse(
    page, live_server, cast
):
    from tests.factories import make_host, make_instance

    instance = make_instance(make_host(), name="chat-k8s", max_num_seqs=96, tensor_parallel_size=1)
    try:
        page.set_viewport_size({"width": 1280, "height": 800})
        log_in(page, live_server, cast.engineer, "/configs/k8s/")
        page.wait_for_selector("#preview pre.config")
        # Chromium moves focus to an autofocus field at its next rendering step,
        # which may come after the preview is in the page.
        page.wait_for_function("document.activeElement?.id === 'id_model'", timeout=5000)
        assert page.is_visible("#id_namespace") and page.locator("#id_gpu_devices").count() == 0
        assert not page.is_visible("#id_startup_minutes")  # folded under Advanced
        page.click("details.advanced > summary")
        assert page.is_visible("#id_startup_minutes")

        page.select_option("#id_from_instance", str(instance.pk))
        page.wait_for_url(f"**/configs/k8s/?from_instance={instance.pk}")
        assert page.input_value("#id_max_num_seqs") == "96" and page.input_value("#id_name") == "chat-k8s"
        assert "name: chat-k8s" in page.inner_text("#preview")

        with page.expect_response(lambda r: "replicas=2" in r.url and r.request.headers.get("hx-request")):
            page.fill("#id_replicas", "2")
        page.wait_for_function("document.querySelector('#preview').innerText.includes('replicas: 2')")
        assert f"from_instance={instance.pk}" in page.url and "max_num_seqs=96" in page.url
        page.screenshot(path=str(OUTPUT_DIR / "configs-k8s-from-instance.png"), full_page=True)
    finally:
        connections.close_all()
