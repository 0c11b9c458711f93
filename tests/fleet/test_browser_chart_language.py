"""The instance page's charts speak the page's language: a Chinese page's time axes read
Chinese dates and its chart toolbar is Chinese (plotly.js ships English only; charts.js
registers its Chinese locale), an English page's stay English, and neither logs an error.
A week's chart, sent as evenly spaced bucket values (x0 and dx), is drawn on dated ticks."""

from __future__ import annotations

import pytest
from django.db import connections

from tests.browser import log_in
from tests.factories import make_host, make_instance
from tests.fleet.test_charts import store

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _tick_labels(page, live_server, cast, chosen: str = "1h") -> str:
    instance = make_instance(make_host(), name="vllm-a")
    span_s = {"1h": 3600, "7d": 7 * 86400}[chosen]
    every = span_s // 60
    store(instance, "ttft_p50_s", [(s, 0.2 + (s // every % 3) / 10) for s in range(0, span_s, every)])
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    log_in(page, live_server, cast.viewer, f"{instance.get_absolute_url()}?range={chosen}")
    page.wait_for_selector("#charts .xtick text")
    labels = " ".join(page.eval_on_selector_all("#charts .xtick text", "els => els.map(e => e.textContent)"))
    assert not errors, errors
    return labels


def test_a_chinese_page_dates_its_time_axes_in_chinese(zh_page, live_server, cast):
    try:
        labels = _tick_labels(zh_page, live_server, cast)
    finally:
        connections.close_all()
    assert "月" in labels and "Dec" not in labels and "Jan" not in labels, labels
    titles = zh_page.eval_on_selector_all("#charts .modebar-btn", "els => els.map(e => e.dataset.title)")
    assert "重置坐标轴" in titles and "Reset axes" not in titles, titles


def test_an_english_page_keeps_english_dates(page, live_server, cast):
    try:
        labels = _tick_labels(page, live_server, cast)
    finally:
        connections.close_all()
    assert "月" not in labels, labels


def test_a_weeks_chart_draws_its_buckets_across_the_week(page, live_server, cast):
    try:
        labels = _tick_labels(page, live_server, cast, "7d")
        path = page.eval_on_selector("#charts .scatterlayer .js-line", "el => el.getAttribute('d')")
        width = page.eval_on_selector("#charts .scatterlayer .js-line", "el => el.getBBox().width")
        plot = page.eval_on_selector("#charts .nsewdrag", "el => el.getBBox().width")
    finally:
        connections.close_all()
    assert path.count("L") >= 30 and path.count("M") == 1, path  # one unbroken line through the buckets
    assert width > 0.9 * plot, (width, plot)  # from a week ago to now, not squeezed into a corner
    assert ":" not in labels.replace("00:00", ""), labels  # days on the ticks, not times of one day
