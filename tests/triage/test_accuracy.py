"""Top-1 accuracy of the shipped rules on real logs people published (GitHub issues), each
labelled with the category its thread's resolution points to (data/real/labels.json)."""

from __future__ import annotations

import json
from pathlib import Path

from core.taxonomy import CATEGORIES
from diagnostics.triage.engine import triage_path

REAL = Path(__file__).parent / "data" / "real"
LABELS = json.loads((REAL / "labels.json").read_text(encoding="utf-8"))


def test_every_labelled_log_exists_with_a_known_category_and_a_source():
    for label in LABELS:
        assert (REAL / label["file"]).is_file(), label["file"]
        assert label["category"] in CATEGORIES, label
        assert label["source"].startswith("https://"), label
    assert sorted(p.name for p in REAL.glob("*.log")) == sorted(label["file"] for label in LABELS)


def test_the_rules_classify_at_least_nine_in_ten_real_logs_right():
    misses = []
    for label in LABELS:
        got = triage_path(REAL / label["file"]).category
        if got != label["category"]:
            misses.append(f"{label['file']}: labelled {label['category']}, triaged {got or 'nothing'}")
    n = len(LABELS)
    acc = (n - len(misses)) / n
    print(f"top-1 accuracy {acc:.0%} on {n} real logs")
    for miss in misses:
        print("  miss:", miss)
    assert n >= 25
    assert acc >= 0.9
