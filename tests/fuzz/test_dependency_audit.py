"""The dependency audit's readers, fuzzed: the cached database file, the lock file and the
safety-db data the registry serves. Each ends and fails only with its own error, and
whatever safety-db data is read makes a database that reads back the same."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import mutated
from tests.hang import ends
from tests.tools.test_dependency_audit import LATEST_SOURCE, RANGES_SOURCE, advisory
from tools.advisory_db import AdvisoryDatabaseError, dump_database, load_database, merge_sources
from tools.advisory_fetch import FetchError, read_safety_db
from tools.dependency_audit import AuditInputError, read_lock

DATABASE = json.dumps(
    {
        "format": 1,
        "sources": [RANGES_SOURCE, LATEST_SOURCE],
        "advisories": [
            advisory("A-1", "django", ["<1.0.4", ">=1.1,<1.1.1"], aliases=["CVE-1"], fixed_in=["1.0.4"]),
            advisory("B-1", "django", ["==5.2.19"], source="latest", summary="s"),
        ],
    }
)
SYNTAX = st.sampled_from(list('{}[]":,<>=!~.0123456789') + ["null", "true", "format", "affected", "covers"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _load(body: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "advisories.json").write_bytes(body)
        with contextlib.suppress(AdvisoryDatabaseError):
            load_database(directory=Path(directory))


@given(mutated([DATABASE], SYNTAX, max_edits=6))
def test_a_damaged_database_file_is_read_or_refused_with_its_own_error(text):
    ends(_load, text.encode("utf-8", "surrogatepass"))


@given(st.binary(max_size=200))
def test_any_bytes_as_the_database_file_are_refused_with_its_own_error(body):
    ends(_load, body)


def _read_lock(text: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "requirements.lock"
        path.write_text(text, encoding="utf-8")
        with contextlib.suppress(AuditInputError):
            read_lock(path=path)


@given(st.lists(st.text(max_size=30) | st.sampled_from(["django==5.2.19", "a[b]==1 ; python_version<'3'"])))
def test_any_lock_file_text_is_read_or_refused_with_its_own_error(lines):
    ends(_read_lock, "\n".join(lines))


def _read_safety_db_and_reload(data) -> None:
    try:
        part, _ = read_safety_db(data=data, version="2021.7.17")
    except FetchError:
        return
    database = merge_sources(parts=[part])
    with tempfile.TemporaryDirectory() as directory:
        dump_database(database=database, directory=Path(directory))
        assert load_database(directory=Path(directory)) == database


ENTRY = st.fixed_dictionaries(
    {"id": st.text(max_size=8) | JSON, "specs": st.lists(st.text(max_size=10) | st.just("<1.0"), max_size=3)},
    optional={"cve": JSON, "advisory": JSON},
)


@given(
    st.dictionaries(st.text(max_size=8), st.lists(ENTRY, max_size=3) | JSON, max_size=4),
    st.integers(-(10**12), 10**12) | JSON,
)
def test_any_safety_db_data_reads_back_the_same_or_is_refused_with_its_own_error(entries, timestamp):
    ends(_read_safety_db_and_reload, {**entries, "$meta": {"timestamp": timestamp}})
