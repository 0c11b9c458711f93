"""The triage corpus is data with provenance, split once by source thread: every log has its
file, a known category (or none), its thread's URL, and its thread's half, and a thread's half
never changes. The score counts "no category" as the right answer where the thread's cause is
in no category."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from core.taxonomy import CATEGORIES
from tests.triage.corpus_eval import NONE, SPLIT_FILE, Entry, assign, load, report, score, thread_of

ENTRIES = load()


def test_every_log_has_its_file_a_known_category_and_a_source():
    for entry in ENTRIES:
        assert entry.path.is_file(), entry.id
        assert entry.category in CATEGORIES or entry.category == NONE, (entry.id, entry.category)
        assert entry.source.startswith("https://"), entry.id
    ids = Counter(entry.id for entry in ENTRIES)
    assert not [i for i, n in ids.items() if n > 1], "duplicate ids"


def test_every_thread_has_its_half_and_the_original_logs_are_all_in_the_development_half():
    split = json.loads(SPLIT_FILE.read_text(encoding="utf-8"))
    assert {entry.thread for entry in ENTRIES} <= set(split)
    assert set(split.values()) <= {"dev", "test"}
    assert all(split[e.thread] == "dev" for e in ENTRIES if e.path.parent.name == "real")


def test_a_thread_keeps_its_half_and_new_ones_are_spread_by_their_name():
    known = {"github.com/a/b/issues/1": "test"}
    split = assign(
        ["github.com/a/b/issues/1", *[f"github.com/x/y/issues/{n}" for n in range(200)]],
        known=known,
        forced_dev={"github.com/x/y/issues/7"},
    )
    assert split["github.com/a/b/issues/1"] == "test" and split["github.com/x/y/issues/7"] == "dev"
    assert 70 < Counter(split.values())["test"] < 130
    assert assign(split, known=split, forced_dev=set()) == split  # once split, always the same


def test_a_thread_is_its_url_without_scheme_fragment_or_trailing_slash():
    assert thread_of("https://github.com/vllm-project/vllm/issues/12#issuecomment-9") == thread_of(
        "http://GitHub.com/vllm-project/vllm/issues/12/"
    )


def test_the_score_counts_no_category_right_where_the_cause_is_in_none(tmp_path: Path):
    entries = [
        Entry("a", tmp_path / "a", "https://x/1", "vllm", "cuda.nccl"),
        Entry("b", tmp_path / "b", "https://x/2", "vllm", NONE),
        Entry("c", tmp_path / "c", "https://x/3", "vllm", "oom.gpu"),
    ]
    said = {"a": "cuda.nccl", "b": "", "c": "cuda.nccl"}
    split = {"x/1": "dev", "x/2": "dev", "x/3": "test"}
    scores = score(entries, split, lambda path: said[path.name])
    assert (scores["dev"].right, scores["dev"].total, scores["test"].right) == (2, 2, 0)
    assert scores["dev"].precision() == {"cuda.nccl": (1, 1), NONE: (1, 1)}
    assert scores["test"].precision() == {"cuda.nccl": (0, 1)}
    shown = report(scores)
    assert "dev half: top-1 100.0% (2/2)" in shown and "test half: top-1 0.0% (0/1)" in shown
    assert "oom.gpu" not in shown  # the test half's misses are not listed unless asked
