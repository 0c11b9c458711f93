"""The downloads, fuzzed: whatever people, alerts or probes wrote into an incident, the
Markdown postmortem renders (bare Markdown, or with the notes' extensions) with no script,
no raw HTML and no link or image but to http, https, mailto or a relative address; and no
cell of the review's CSV opens in a spreadsheet as a formula."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.safe_markdown import inert_markdown
from core.spreadsheet_cells import FORMULA_STARTS
from incidents.models import Incident, TimelineEntry
from incidents.postmortem import postmortem
from incidents.stats import CSV_COLUMNS, IncidentRecord, csv_row
from tests.hang import ends
from tests.inert_html import live_parts

# Pieces of the tricks, often, beside any other text.
TRICKS = [
    "javascript:", "JaVaScRiPt:", "java\tscript:", "java\nscript:", "vbscript:", "data:", "file:",
    "&#106;", "&#x6A;", "&#0106", "&colon;", "&Tab;", "&NewLine;", "%6A", "%3A", "\\:", "\\", "&",
    "<", ">", "<script>", "</", "<!--", "<?", "<!", "<a href=", "<img src=x onerror=", "<svg/onload=",
    "<https://a.example>", "<mailto:x@y.z>", "<x@y.z>", '"', "'", "[", "]", "(", ")", "](", "]:", "![",
    "{: onclick=x}", "`", "```", "\n", "\n\n", " ", "    ", "> ", "- ", "#", "|",
    "=", "+", "-", "@", "\t", "\r", "\uff1d",
]  # fmt: skip
TEXT = st.lists(st.one_of(st.sampled_from(TRICKS), st.text(max_size=4)), max_size=24).map("".join)
STORED = TEXT.map(lambda text: text.replace("\x00", ""))  # PostgreSQL stores no NUL in text


@given(TEXT)
def test_any_text_made_inert_renders_with_nothing_live(text):
    assert ends(live_parts, ends(inert_markdown, text)) == []


@pytest.mark.django_db
@given(
    title=STORED.map(lambda text: text[:200]),
    bodies=st.tuples(STORED, STORED, STORED, STORED),
    author=STORED.map(lambda text: text[:150]),
    names=st.lists(STORED, max_size=3),
)
def test_a_postmortem_of_any_fields_renders_with_nothing_live(title, bodies, author, names):
    root_cause, resolution, follow_ups, note = bodies
    incident = Incident.objects.create(
        title=title,
        root_cause=root_cause,
        resolution=resolution,
        follow_ups=follow_ups,
        models_affected=names,
        evidence={"instances": {name: {"model": name, "host": name, "verdict": name,
                                       "findings": [{"evidence": name}]} for name in names}},
    )  # fmt: skip
    TimelineEntry.objects.create(incident=incident, kind="note", text=note, author=author)
    assert ends(live_parts, postmortem(incident)) == []


T0 = datetime(2025, 3, 3, 10, 0, tzinfo=UTC)
FIGURES = {"id", "tta_minutes", "ttr_minutes"}  # the console's own numbers


@given(
    texts=st.lists(TEXT, min_size=6, max_size=6),
    names=st.lists(st.lists(TEXT, max_size=3), min_size=3, max_size=3),
    minutes=st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)),
)
def test_no_csv_cell_starts_like_a_formula(texts, names, minutes):
    title, category, severity, status, *_ = texts
    hosts, instances, models = (tuple(group) for group in names)
    record = IncidentRecord(
        id=1, category=category, title=title, severity=severity, status=status, hosts=hosts,
        instances=instances, models=models, started_at=T0, detected_at=T0,
        acknowledged_at=T0 + timedelta(minutes=minutes[0]), resolved_at=T0 + timedelta(minutes=minutes[1]),
    )  # fmt: skip
    out = io.StringIO()
    csv.writer(out).writerow(ends(csv_row, record))
    [row] = list(csv.reader(io.StringIO(out.getvalue())))
    assert len(row) == len(CSV_COLUMNS)
    for column, cell in zip(CSV_COLUMNS, row, strict=True):
        if column in FIGURES:
            float(cell or 0)  # a number, as written
        else:
            assert not cell.startswith(FORMULA_STARTS), (column, cell)
