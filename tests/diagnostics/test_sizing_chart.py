"""The sizing page's chart: max concurrency against context length for four memory shares and
both KV dtypes, and these flags marked, as plain figure data on the console's template."""

import json

import pytest
from django.utils import translation

from core import figures
from diagnostics.sizing_service import CHART_KV_DTYPES, CHART_UTILIZATIONS, concurrency_chart

pytestmark = pytest.mark.django_db


@pytest.fixture
def engineer_client(client, cast):
    client.force_login(cast.engineer)
    return client


def chart(engineer_client) -> dict:
    response = engineer_client.get("/sizing/", {"model": "llama-3.1-8b-instruct", "gpu": "h100-80gb"})
    return response.context["chart"]


def test_it_draws_a_line_per_memory_share_and_kv_dtype_and_marks_these_flags(engineer_client):
    figure = chart(engineer_client)
    lines, (flags,) = figure["data"][:-1], figure["data"][-1:]
    assert len(lines) == len(CHART_UTILIZATIONS) * len(CHART_KV_DTYPES)
    assert [t["line"]["dash"] for t in lines] == ["solid"] * 4 + ["dash"] * 4
    assert lines[0]["name"] == "0.8 · KV auto" and flags["name"] == "these flags"
    assert all(a >= b for a, b in zip(lines[0]["y"], lines[0]["y"][1:], strict=False))  # longer: fewer
    assert flags["mode"] == "markers" and len(flags["x"]) == 2


def test_its_axes_are_logarithmic_with_titles_in_the_readers_language(engineer_client):
    layout = chart(engineer_client)["layout"]
    assert layout["xaxis"] == layout["xaxis"] | {
        "type": "log",
        "title": {"text": "tokens per request (context)"},
    }
    assert layout["yaxis"] == layout["yaxis"] | {"type": "log", "title": {"text": "requests at once"}}
    assert layout["template"] is figures.TEMPLATE


def test_it_is_plain_json_that_the_page_embeds(engineer_client):
    response = engineer_client.get("/sizing/")
    figure = response.context["chart"]
    assert json.loads(json.dumps(figure)) == figure
    assert 'id="concurrency-figure"' in response.content.decode()
    with translation.override("zh-hans"):
        chinese = concurrency_chart(response.context["sizing"])
    assert chinese["layout"]["yaxis"]["title"]["text"] != "requests at once"


def test_the_results_partial_embeds_the_chart_as_compact_json(engineer_client):
    response = engineer_client.get(
        "/sizing/",
        {"model": "llama-3.1-8b-instruct", "gpu": "h100-80gb"},
        headers={"HX-Request": "true", "HX-Target": "results"},
    )
    page = response.content.decode()
    assert page.startswith('<div id="results"') and "<html" not in page
    text = page.split('<script id="concurrency-figure" type="application/json">', 1)[1].split("</script>")[0]
    embedded = json.loads(text)
    assert ", " not in text and len(embedded["data"]) == len(response.context["chart"]["data"])
    assert embedded["layout"]["yaxis"]["title"]["text"] == "requests at once"
