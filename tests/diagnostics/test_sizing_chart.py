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


def _shipped_sizings():
    """(model key, spec, its sizing) for every shipped model at four launches: the newest
    version on 8 H100s, 0.11 eager on 4 L4s, 0.10 with a measured activation, and a KV cache
    set by --kv-cache-memory-bytes; launches no vLLM could make are left out."""
    from diagnostics.sizing import calculator, catalog
    from diagnostics.sizing.calculator import SizingSpec
    from diagnostics.sizing.memory import Measured
    from fleet import gpu_catalog

    gib = 1 << 30
    h100, l4 = gpu_catalog.get("h100-80gb"), gpu_catalog.get("l4")
    for entry in catalog.shipped():
        arch = entry.architecture()
        for spec in (
            SizingSpec(arch=arch, gpu=h100, gpus=8, max_model_len=8192, vllm_version="0.21"),
            SizingSpec(arch=arch, gpu=l4, gpus=4, vllm_version="0.11", enforce_eager=True),
            SizingSpec(
                arch=arch, gpu=h100, gpus=8, vllm_version="0.10", measured=Measured(activation=2.5 * gib)
            ),
            SizingSpec(arch=arch, gpu=h100, gpus=8, kv_cache_memory_bytes=20 * gib),
        ):
            try:
                yield entry.key, spec, calculator.compute(spec)
            except calculator.SpecError:
                continue


def test_each_line_is_what_the_calculator_finds_with_only_that_share_and_kv_dtype_changed():
    """The curves come from one sizing's terms, not a calculator run each: for every shipped
    model and several launches, the same blocks as the whole calculation of that variant."""
    from dataclasses import replace

    from diagnostics.sizing import calculator

    checked = 0
    for key, spec, sizing in _shipped_sizings():
        for kv_dtype, _dash in CHART_KV_DTYPES:
            for util in CHART_UTILIZATIONS:
                whole = calculator.compute(
                    replace(spec, gpu_memory_utilization=util, kv_cache_dtype=kv_dtype)
                )
                kv, blocks = calculator.kv_blocks_with(
                    sizing, gpu_memory_utilization=util, kv_cache_dtype=kv_dtype
                )
                assert (kv, blocks) == (whole.kv, whole.capacity.num_blocks), (key, spec, util, kv_dtype)
                checked += 1
    assert checked > 8 * 100


def test_a_sizing_without_its_figures_has_the_same_numbers():
    """The recommendations and fixes size variants without figures: everything else equal."""
    from dataclasses import replace

    from diagnostics.sizing import calculator

    checked = 0
    for key, spec, whole in _shipped_sizings():
        numbers = calculator.compute(spec, explain=False)
        assert numbers.figures == () and whole.figures
        assert replace(numbers, figures=whole.figures) == whole, key
        checked += 1
    assert checked > 100
