"""How far a classifier learned from the development half generalises: a measurement for the
record (docs/log-triage.md, "Why the test-half aim is out of reach"), not a part of the triage.

Multinomial naive Bayes over the words of each log's suspicious lines (the lines the triage
itself shows when no rule is sure, diagnostics/triage/unsure.py), trained and scored on the
development half only, by leave-one-thread-out: each thread's logs are predicted by a model
trained on every other development thread. The learning curve trains on a share of the other
threads (fixed seed) to show how the score moves with more labelled logs. The test half is
never read.

    python -m tests.triage.learned_baseline
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from tests.triage.corpus_eval import SPLIT_FILE, Entry, load

_WORD = re.compile(r"[a-z_][a-z0-9_]{2,}")
SMOOTHING = 0.5
LAST_LINES = 60
SHARES = (0.25, 0.5, 0.75, 1.0)
SEED = 20261205


@dataclass(frozen=True)
class Example:
    entry: Entry
    words: frozenset[str]


def words_of(entry: Entry) -> frozenset[str]:
    from diagnostics.triage import unsure

    tail = entry.path.read_bytes()[-unsure.TAIL_BYTES :]
    lines = [raw.decode("utf-8", "replace").strip() for raw in tail.split(b"\n")]
    suspicious = [line for line in lines if line and unsure._weight(line)]
    return frozenset(w for line in suspicious[-LAST_LINES:] for w in _WORD.findall(line.lower()))


class NaiveBayes:
    def __init__(self, examples: Sequence[Example]) -> None:
        self.classes: Counter[str] = Counter(e.entry.category for e in examples)
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)
        for e in examples:
            self.counts[e.entry.category].update(e.words)
        self.vocabulary = {w for e in examples for w in e.words}
        self.totals = {c: sum(self.counts[c].values()) for c in self.classes}

    def predict(self, words: frozenset[str]) -> str:
        n, size = sum(self.classes.values()), len(self.vocabulary)

        def log_posterior(category: str) -> float:
            denominator = self.totals[category] + SMOOTHING * size
            return math.log(self.classes[category] / n) + sum(
                math.log((self.counts[category][w] + SMOOTHING) / denominator)
                for w in words
                if w in self.vocabulary
            )

        return max(sorted(self.classes), key=log_posterior)


def leave_one_thread_out(examples: Sequence[Example], share: float, rng: random.Random) -> float:
    threads = sorted({e.entry.thread for e in examples})
    right = 0
    for thread in threads:
        others = [t for t in threads if t != thread]
        kept = set(rng.sample(others, max(1, round(share * len(others)))))
        model = NaiveBayes([e for e in examples if e.entry.thread in kept])
        right += sum(model.predict(e.words) == e.entry.category for e in examples if e.entry.thread == thread)
    return right / len(examples)


def main() -> int:
    import django

    django.setup()
    split = json.loads(SPLIT_FILE.read_text(encoding="utf-8"))
    development = [Example(e, words_of(e)) for e in load() if split.get(e.thread) == "dev"]
    threads = len({e.entry.thread for e in development})
    print(f"development half: {len(development)} logs, {threads} threads (the test half is not read)")
    for share in SHARES:
        accuracy = leave_one_thread_out(development, share, random.Random(SEED))
        print(f"  trained on {share:4.0%} of the other threads: top-1 {accuracy:.1%}")
    return 0


if __name__ == "__main__":
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ops_console.settings")
    sys.exit(main())
