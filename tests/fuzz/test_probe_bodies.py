"""What engines send back, fuzzed: /metrics pages, stream chunks, JSON answers and error
bodies. Each parser ends and fails only with its own error (the probe turns that into a
`garbage` outcome); nothing an engine sends can hang a probe or escape it as a crash."""

from __future__ import annotations

import contextlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.probes.engines import DIALECTS
from fleet.probes.error_bodies import error_message
from fleet.probes.outcomes import GarbageResponse
from fleet.probes.readiness import _parse
from fleet.probes.scrape import parse_exposition
from fleet.probes.streaming import _decode
from tests.fleet.test_dcgm import EXPORTER_TEXT
from tests.fuzz.strategies import mutated
from tests.hang import ends
from tests.probes.test_scrape import V0_7, V0_11

PAGES = [V0_7, V0_11]
# The characters that matter to the exposition format, often, beside any others.
SYNTAX = st.sampled_from(list('{}"=,\\ \t\n#+-.eE0123456789') + ["le", "Inf", "NaN", "_bucket"])


def _parse_page(text: str) -> None:
    with contextlib.suppress(ValueError):  # garbage: the probe's outcome says so
        parse_exposition(text, engine="vllm", timestamp=0.0)


# The case that once hung the prober is rare among mutations (about 1 in 70 pages): more
# examples here than the profile's default, which are cheap.
@settings(max_examples=max(400, settings().max_examples))
@given(mutated(PAGES, SYNTAX))
def test_a_mutated_metrics_page_parses_or_is_garbage_and_always_ends(text):
    ends(_parse_page, text)


@given(st.lists(SYNTAX | st.characters(), max_size=200).map("".join))
def test_any_text_as_a_metrics_page_parses_or_is_garbage_and_always_ends(text):
    ends(_parse_page, "vllm:num_requests_running" + text)
    ends(_parse_page, text)


CHUNKS = [
    'data: {"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]}',
    '{"token":{"id":1,"text":"Hi","special":false},"details":{"finish_reason":"length","generated_tokens":1}}',
    '{"message":{"role":"assistant","content":"Hi"},"done":true,"eval_count":1,"prompt_eval_count":3}',
]
JSON_SYNTAX = st.sampled_from(list('{}[]":,0123456789') + ["null", "true", "-1e999", '"x"'])


def _stream_chunk(payload: str) -> None:
    for dialect in DIALECTS.values():
        with contextlib.suppress(GarbageResponse):
            dialect.parse_event(_decode(payload))


@given(mutated([c.removeprefix("data: ") for c in CHUNKS], JSON_SYNTAX))
def test_a_mutated_stream_chunk_is_an_event_or_garbage_for_every_engine(payload):
    ends(_stream_chunk, payload)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )
)
def test_any_json_value_as_a_stream_chunk_is_an_event_or_garbage(value):
    ends(_stream_chunk, json.dumps(value))


class _Answer:
    """What readiness reads of a fetch: an ok answer with this body."""

    ok = True
    status = 200
    error_text = ""
    elapsed_s = 0.0

    def __init__(self, body: bytes) -> None:
        self.body = body


@given(
    st.binary(max_size=300)
    | st.text(max_size=300).map(str.encode)
    | mutated(
        texts=[
            '{"data":[{"id":"m","object":"model"}]}',
            '{"version":"0.11.2"}',
            '{"model_id":"m","max_input_tokens":4}',
            '{"models":[{"name":"m"}]}',
        ],
        alphabet=JSON_SYNTAX,
    ).map(str.encode)
)
def test_readiness_answers_read_or_are_garbage_and_error_bodies_give_a_short_message(body):
    for dialect in DIALECTS.values():
        for route in dialect.readiness_routes:
            if route.read is not None:
                ends(_parse, route.path, _Answer(body), route.read)
    assert len(ends(error_message, body)) <= 300


def _read_dcgm(text: str) -> None:
    from fleet.nvml.base import NvmlError
    from fleet.nvml.dcgm import reading_from_dcgm

    with contextlib.suppress(NvmlError):
        reading_from_dcgm(text)


@settings(max_examples=max(200, settings().max_examples))
@given(mutated([EXPORTER_TEXT], SYNTAX))
def test_a_mutated_dcgm_exporter_page_reads_or_is_refused_clearly(text):
    ends(_read_dcgm, text)


@given(st.binary(max_size=200))
def test_an_error_message_holds_no_control_characters(body):
    message = ends(error_message, b'{"error": "' + body.replace(b'"', b"") + b'"}')
    assert not any(ord(c) < 32 and c not in "\t\n" or 0x7F <= ord(c) <= 0x9F for c in message)
