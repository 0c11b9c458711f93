"""Alertmanager's webhook payloads, fuzzed: any bytes, real payloads with a value swapped,
dropped or added anywhere, and real payloads with their text cut about. parse() ends, and
either returns a spec that either database can store or refuses with PayloadError; nothing
else escapes it to become a 500 or a delivery that fails for ever."""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from incidents.alertmanager_payload import FIRING, RESOLVED, PayloadError, WebhookSpec, parse
from tests.hang import ends

# Values that reach the parser's edges: Go's zero time, offsets that leave UTC's years,
# nanoseconds, NUL and lone surrogates, the statuses and the version, numbers that are not ints.
EDGES = st.sampled_from(
    [
        "4", 4, "firing", "resolved", "pending", "", "T", "0001-01-01T00:00:00Z",
        "2026-12-03T02:58:00.123456789Z", "9999-12-31T23:59:59-05:00", "0001-01-01T00:30:00+01:00",
        "2026-12-03T02:58:00", "2026-13-03T02:58:00Z", "x\x00y", "\ud800", "f" * 65, -1, 0, 2**70, 1.5,
        float("nan"), True, None, [], {},
    ]
)  # fmt: skip
SYNTAX = st.sampled_from([*'{}[]":,0\\T-', "null", "\\u0000", "\\ud800"]) | st.text(max_size=3)
# The edges as often as everything else together: a short run still meets them.
JSON = EDGES | st.recursive(
    EDGES | st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _alert(i: int, status: str) -> dict:
    return {
        "status": status,
        "labels": {"alertname": "VLLMHighTTFT", "instance": f"10.0.0.{i}:8000", "severity": "warning"},
        "annotations": {"summary": "TTFT p99 above 2 s"},
        "startsAt": "2026-12-03T02:58:00.123456789Z",
        "endsAt": "0001-01-01T00:00:00Z" if status == FIRING else "2026-12-03T03:05:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
        "fingerprint": f"{i:016x}",
    }


REAL = {
    "version": "4",
    "groupKey": '{}:{alertname="VLLMHighTTFT"}',
    "truncatedAlerts": 0,
    "status": "firing",
    "receiver": "ops-console",
    "groupLabels": {"alertname": "VLLMHighTTFT"},
    "commonLabels": {"alertname": "VLLMHighTTFT", "severity": "warning"},
    "commonAnnotations": {},
    "externalURL": "http://alertmanager:9093",
    "alerts": [_alert(1, FIRING), _alert(2, RESOLVED)],
}


def _places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path to a value inside `value` (dict keys and list indexes)."""
    found = [path]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, item in items:
        found += _places(item, (*path, key))
    return found


@st.composite
def mutated_payloads(draw) -> bytes:
    """A real payload with a few values replaced, removed or added at any depth."""
    payload = json.loads(json.dumps(REAL))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_places(payload)))
        if not path:
            payload = draw(JSON)
            continue
        *parents, last = path
        holder = payload
        for key in parents:
            holder = holder[key]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "remove" and isinstance(holder, dict):
            del holder[last]
        elif action == "add" and isinstance(holder, dict):
            holder[draw(st.text(max_size=8))] = draw(JSON)
        else:
            holder[last] = draw(JSON)
        if not isinstance(payload, dict | list):
            break
    return json.dumps(payload).encode()


@st.composite
def cut_about(draw) -> bytes:
    """A real payload's text with a few characters inserted, deleted or replaced."""
    text = json.dumps(REAL)
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        text = (
            text[:at]
            + draw(st.sampled_from(list('{}[]":,0\\T-') + ["null", "\\u0000"]) | st.text(max_size=3))
            + text[at + cut :]
        )
    return text.encode("utf-8", "surrogatepass")


def _storable(spec: WebhookSpec) -> None:
    """What the console writes from a spec: text either database takes, times in UTC."""
    texts = [
        spec.receiver,
        spec.group_key,
        spec.external_url,
        *spec.group_labels,
        *spec.group_labels.values(),
    ]
    for alert in spec.alerts:
        texts += [alert.fingerprint, alert.generator_url, *alert.labels, *alert.labels.values()]
        texts += [*alert.annotations, *alert.annotations.values()]
        assert alert.status in (FIRING, RESOLVED) and len(alert.fingerprint) <= 64
        for at in (alert.starts_at, alert.ends_at):
            assert at is None or at.tzinfo is UTC
    for text in texts:
        assert "\x00" not in text
        text.encode()  # no lone surrogates


def _parse_or_refuse(body: bytes) -> None:
    try:
        spec = parse(body=body)
    except PayloadError as exc:
        assert exc.field and str(exc).startswith(exc.field)
        return
    _storable(spec)


@given(st.binary(max_size=2000))
def test_any_bytes_are_parsed_or_refused_with_a_payload_error_and_it_always_ends(body):
    ends(_parse_or_refuse, body)


# Cheap, and a swapped value meets a parser's edge only now and then: more examples here than
# the profile's default.
@settings(max_examples=max(400, settings().max_examples))
@given(mutated_payloads())
def test_a_real_payload_with_values_swapped_dropped_or_added_is_parsed_or_refused(body):
    ends(_parse_or_refuse, body)


@given(cut_about())
def test_a_real_payload_cut_about_is_parsed_or_refused(body):
    ends(_parse_or_refuse, body)


def test_the_real_payload_itself_parses():
    spec = parse(body=json.dumps(REAL).encode())
    assert [a.status for a in spec.alerts] == [FIRING, RESOLVED] and spec.alerts[0].ends_at is None
