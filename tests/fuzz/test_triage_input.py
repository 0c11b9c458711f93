"""The log triage over any pasted text or uploaded bytes: it ends with a result or a
TriageInputError saying what to do, never another exception. Each triage starts its reader
threads, so these run few examples."""

from __future__ import annotations

import gzip
import io
import json
from datetime import datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics.triage.engine import TriageInputError, triage_stream, triage_text
from diagnostics.triage_service import triage_paste
from tests.hang import ends
from tests.triage.access_logs import line as access_line

CORPUS = Path(__file__).resolve().parents[1] / "triage" / "corpus"
LOGS = [path.read_bytes()[:4000] for path in sorted(CORPUS.glob("*/*.log"))[:12]]
ACCESS = "\n".join(
    access_line(f"10.0.3.{n}", datetime(2026, 12, 3, 13, n), 200 + n % 3 * 100) for n in range(20)
)
JSON_LINES = "\n".join(
    json.dumps({"level": "info", "msg": f"step {n}", "fields": {"n": n}}) for n in range(20)
)
SAMPLES = [*LOGS, ACCESS.encode(), JSON_LINES.encode()]
FEW = settings(max_examples=max(5, settings.default.max_examples // 2))
PIECES = [b"\x00", b"\xff\xfe", b"\x1f\x8b", b"\x1b[31m", b"^[[0m", b"\r", b"\n" * 3, b"{", b"[" * 300,
          b'"', b"9" * 400, b"[99/Zzz/9999:99:99:99 +0000]", b"rt=", b"\xed\xa0\x80", b"\xc3"]  # fmt: skip
edits = st.lists(
    st.tuples(st.floats(0, 1), st.integers(0, 40), st.binary(max_size=12) | st.sampled_from(PIECES)),
    min_size=1,
    max_size=5,
)


def _edit(data: bytes, changes: list[tuple[float, int, bytes]]) -> bytes:
    for where, length, piece in changes:
        at = int(where * len(data))
        data = data[:at] + piece + data[at + length :]
    return data


def _triages_or_refuses(call, data) -> None:
    try:
        ends(call, data)
    except TriageInputError as refused:
        assert str(refused) and refused.message


@FEW
@given(data=st.binary(max_size=2000))
def test_any_bytes_are_triaged_or_refused(data):
    _triages_or_refuses(triage_text, data)


@FEW
@given(text=st.text(max_size=2000))
def test_any_pasted_text_is_triaged_or_refused(text):
    _triages_or_refuses(triage_paste, text)


@FEW
@given(sample=st.sampled_from(SAMPLES), changes=edits)
def test_a_mutated_real_log_is_triaged_or_refused(sample, changes):
    _triages_or_refuses(triage_text, _edit(sample, changes))


@FEW
@given(sample=st.sampled_from(SAMPLES), changes=edits, packed_changes=st.none() | edits)
def test_a_gzip_upload_mutated_before_or_after_packing_is_triaged_or_refused(sample, changes, packed_changes):
    packed = gzip.compress(_edit(sample, changes))
    if packed_changes:
        packed = _edit(packed, packed_changes)
    _triages_or_refuses(lambda data: triage_stream(io.BytesIO(data), max_bytes=1 << 20), packed)
