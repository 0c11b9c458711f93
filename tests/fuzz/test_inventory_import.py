"""Inventory import over any text or bytes: the plan ends, lists located errors instead of
raising, and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.inventory_io import ImportPlan, UnreadableFile, plan_import, text_of
from fleet.models import ChangeLogEntry, GpuHost
from tests.hang import ends

pytestmark = pytest.mark.django_db

DEMO_YAML = (Path(__file__).resolve().parents[2] / "fleet" / "demo_fleet.yaml").read_text(encoding="utf-8")
DEMO_CSV = (
    "kind,name,address,host,index,model,form_factor,base_url,served_model_name,gpus,tags\n"
    "host,gpu-a100-01,10.20.1.11,,,,,,,,a100;prod\n"
    "gpu,,,gpu-a100-01,0,a100-sxm4-80gb,sxm,,,,\n"
    'instance,vllm-a,,gpu-a100-01,,,,"http://10.20.1.11:8000",qwen,0,\n'
)
# What breaks parsers: YAML's indicators, CSV's quotes and separators, control characters,
# NUL, a byte-order mark, lone surrogates, noncharacters and line breaks of other kinds.
TRICKY = "\x00\x01\x08\t\x0b\x0c\r\n\x11\x1b\x7f\x85\xa0\u2028\ufeff\ufffe\ud800\udcff\U0001f600"
PIECES = [
    "&a",
    "*a",
    "<<: *a",
    "!!binary",
    "!!python/object:os.system",
    "!!timestamp 2026-13-45",
    "---",
    "...",
    "? ",
    "[",
    "]",
    "{",
    "}",
    ": ",
    "- ",
    "#",
    '"',
    "'",
    ",",
    ";",
    "\\0",
    "\\x11",
    "\\ud800",
    ".nan",
    "-.inf",
    "1e400",
    "9" * 5000,
    "[" * 200,
    "~",
    "null",
    "yes",
]
# Planning touches the database: these run two thirds of the profile's examples.
FEWER = settings(max_examples=max(10, settings.default.max_examples * 2 // 3))
characters = st.characters(codec=None) | st.sampled_from(TRICKY)
fragments = st.text(characters, max_size=20) | st.sampled_from(PIECES)


def _edit(text: str, edits: list[tuple[float, int, str]]) -> str:
    """Each edit cuts `length` characters at a relative position and puts `piece` there."""
    for where, length, piece in edits:
        at = int(where * len(text))
        text = text[:at] + piece + text[at + length :]
    return text


edits = st.lists(st.tuples(st.floats(0, 1), st.integers(0, 40), fragments), min_size=1, max_size=6)


def _plan(text: str, fmt: str) -> ImportPlan:
    """plan_import in ends()'s thread, whose own database connection is closed after it."""
    try:
        return plan_import(text=text, fmt=fmt)
    finally:
        connection.close()


def _plans_without_writing(text: str, fmt: str) -> ImportPlan:
    before = GpuHost.objects.count(), ChangeLogEntry.objects.count()
    plan = ends(_plan, text, fmt)
    assert isinstance(plan, ImportPlan)
    assert all(str(error) for error in plan.errors)  # each error reads as a sentence
    assert (GpuHost.objects.count(), ChangeLogEntry.objects.count()) == before
    return plan


@given(text=st.text(characters, max_size=400), fmt=st.sampled_from(["yaml", "csv"]))
def test_any_text_is_planned_without_raising(text, fmt):
    _plans_without_writing(text, fmt)


@FEWER
@given(edits=edits)
def test_a_mutated_yaml_inventory_is_planned_without_raising(edits):
    _plans_without_writing(_edit(DEMO_YAML, edits), "yaml")


@FEWER
@given(edits=edits)
def test_a_mutated_csv_inventory_is_planned_without_raising(edits):
    _plans_without_writing(_edit(DEMO_CSV, edits), "csv")


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(characters, max_size=12)
    | st.dates()
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10) | st.integers(), inner, max_size=4)
    ),
    max_leaves=12,
)
field_names = st.sampled_from(
    ["name", "address", "host", "index", "model", "gpus", "tags", "nvlink_peers", "instances", "kind",
     "cpu_cores", "gpu_memory_utilization", "tensor_parallel_size", "drill", "base_url"]
) | st.text(max_size=8)  # fmt: skip
records = st.dictionaries(field_names, values, max_size=6) | values
documents = st.dictionaries(
    st.sampled_from(["hosts", "gpus", "instances", "gateways"]) | st.text(max_size=6),
    st.lists(records, max_size=3) | values,
    max_size=4,
)


@FEWER
@given(document=documents)
def test_a_document_of_any_shape_and_types_is_planned_without_raising(document):
    text = yaml.safe_dump(document, allow_unicode=True)
    _plans_without_writing(text, "yaml")


@FEWER
@given(
    data=st.binary(max_size=300) | edits.map(lambda e: _edit(DEMO_YAML, e).encode("utf-8", "surrogatepass"))
)
def test_any_bytes_are_read_as_text_or_refused_with_the_line(data):
    try:
        text = ends(text_of, data)
    except UnreadableFile as refused:
        assert "UTF-8" in str(refused)
        return
    _plans_without_writing(text, "yaml")
