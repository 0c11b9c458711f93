"""The triage corpus (real published logs with the root cause their threads establish) and
its honest score (`make eval`).

The corpus is every `tests/triage/corpus/*/index.yaml` entry plus the 50 logs the rules were
first written against (tests/triage/data/real/labels.json). It is split once, by source
thread, into a development half and a test half; `split.json` beside this file records the
split and is only ever added to: a thread keeps its half forever. The 50 original logs are in
the development half (the rules were written against them). Rules are written against the
development half; the test half is scored, never read for its misses.

    python -m tests.triage.corpus_eval            # both scores, confusion, precision per category
    python -m tests.triage.corpus_eval --split    # assign new threads to a half (once)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
ORIGINAL = HERE / "data" / "real"
SPLIT_FILE = CORPUS / "split.json"
NONE = "none"  # the thread's cause is in no category: the right answer is no category


@dataclass(frozen=True)
class Entry:
    id: str
    path: Path
    source: str
    engine: str
    category: str  # a taxonomy key, or NONE

    @property
    def thread(self) -> str:
        return thread_of(self.source)


def thread_of(url: str) -> str:
    """The source thread of a URL: scheme and fragment dropped, trailing slash too."""
    parts = urlsplit(url.strip())
    return f"{parts.netloc.lower()}{parts.path.rstrip('/')}"


def load(*, corpus: Path = CORPUS, original: Path = ORIGINAL) -> list[Entry]:
    entries = []
    for label in json.loads((original / "labels.json").read_text(encoding="utf-8")):
        engine = label["file"].split("-", 1)[0]
        entries.append(
            Entry(label["file"], original / label["file"], label["source"], engine, label["category"])
        )
    for index in sorted(corpus.glob("*/index.yaml")):
        for row in yaml.safe_load(index.read_text(encoding="utf-8")) or []:
            path = index.parent / f"{row['id']}.log"
            entries.append(Entry(row["id"], path, row["source"], row["engine"], row["category"]))
    return entries


def assign(threads: Iterable[str], *, known: dict[str, str], forced_dev: set[str]) -> dict[str, str]:
    """Each new thread to a half by a hash of its name (half the threads each way); the
    threads already assigned keep their half."""
    split = dict(known)
    for thread in sorted(set(threads)):
        if thread in split:
            continue
        if thread in forced_dev:
            split[thread] = "dev"
        else:
            split[thread] = "dev" if int(hashlib.sha256(thread.encode()).hexdigest(), 16) % 2 == 0 else "test"
    return split


@dataclass
class Score:
    half: str
    total: int = 0
    right: int = 0
    confusion: Counter | None = None  # (labelled, triaged) -> count

    @property
    def accuracy(self) -> float:
        return self.right / self.total if self.total else 0.0

    def precision(self) -> dict[str, tuple[int, int]]:
        """Per triaged category: (right, said)."""
        said: Counter = Counter()
        right: Counter = Counter()
        for (labelled, got), n in (self.confusion or {}).items():
            said[got] += n
            if got == labelled:
                right[got] += n
        return {category: (right[category], said[category]) for category in said}


def score(entries: list[Entry], split: dict[str, str], triage: Callable[[Path], str]) -> dict[str, Score]:
    """Top-1 per half: the triaged category (or NONE for no category) against the label."""
    scores = {half: Score(half, confusion=Counter()) for half in ("dev", "test")}
    for entry in entries:
        half = scores[split[entry.thread]]
        got = triage(entry.path) or NONE
        half.total += 1
        half.right += got == entry.category
        half.confusion[(entry.category, got)] += 1
    return scores


def report(scores: dict[str, Score], *, show_test_misses: bool = False) -> str:
    lines = []
    for half in ("dev", "test"):
        s = scores[half]
        lines.append(f"{half:>4} half: top-1 {s.accuracy:.1%} ({s.right}/{s.total})")
    for half in ("dev", "test"):
        s = scores[half]
        lines.append(f"\nprecision per triaged category, {half} half (right / said):")
        for category, (right, said) in sorted(s.precision().items()):
            flag = "" if not said or right / said >= 0.8 else "   < 80 %"
            lines.append(f"  {category:<34} {right:>3} / {said:<3} {right / said:6.0%}{flag}")
    dev = scores["dev"]
    lines.append("\nconfusion, dev half (labelled -> triaged: count), misses only:")
    for (labelled, got), n in sorted(dev.confusion.items()):
        if labelled != got:
            lines.append(f"  {labelled:<34} -> {got:<34} {n}")
    if show_test_misses:
        lines.append("\nconfusion, test half, misses only:")
        for (labelled, got), n in sorted(scores["test"].confusion.items()):
            if labelled != got:
                lines.append(f"  {labelled:<34} -> {got:<34} {n}")
    return "\n".join(lines)


def _triage(path: Path) -> str:
    from diagnostics.triage.engine import triage_path

    return triage_path(path).category


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", action="store_true", help="assign new threads to a half, write split.json")
    parser.add_argument(
        "--show-test-misses",
        action="store_true",
        help="also list the test half's misses (for the report only)",
    )
    args = parser.parse_args(argv)
    entries = load()
    known = json.loads(SPLIT_FILE.read_text(encoding="utf-8")) if SPLIT_FILE.exists() else {}
    forced = {thread_of(e.source) for e in entries if e.path.parent == ORIGINAL}
    if args.split:
        split = assign((e.thread for e in entries), known=known, forced_dev=forced)
        SPLIT_FILE.write_text(json.dumps(split, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        halves = Counter(split[e.thread] for e in entries)
        print(f"{len(split)} threads; logs per half: {dict(halves)}")
        return 0
    missing = sorted({e.thread for e in entries} - set(known))
    if missing:
        print(f"{len(missing)} thread(s) are in no half yet: run with --split first", file=sys.stderr)
        return 2
    import django

    django.setup()
    print(report(score(entries, known, _triage), show_test_misses=args.show_test_misses))
    return 0


if __name__ == "__main__":
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ops_console.settings")
    sys.exit(main())
