"""The sizing calculator's honest score from scratch (`make eval`): real vLLM start-ups, each
sized from its model, GPU, version and flags alone, with no figure of its log handed in, and
compared with the "Available KV cache memory" and "GPU KV cache size" the log printed.

The cases (diagnostics/sizing/data/scratch_checks.json) were split once by source thread into
a development half, looked at while the estimates were changed, and a test half, only scored.
Each case keeps its half ("half" in the data) forever; a new case gets its half from
`--split`, which sorts the new threads by hash and fills the smaller half first.

    python -m tests.sizing_eval.scratch_eval           # the table, both halves' median and worst
    python -m tests.sizing_eval.scratch_eval --split   # give new cases a half (once)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from diagnostics.sizing import catalog
from diagnostics.sizing.architecture import Architecture, from_hf_config
from diagnostics.sizing.calculator import SizingSpec, compute
from fleet import gpu_catalog

CHECKS_FILE = Path(__file__).resolve().parents[2] / "diagnostics" / "sizing" / "data" / "scratch_checks.json"
GiB = 1 << 30
HALVES = ("dev", "test")
# The issue's aims for the absolute error, in per cent.
AIM_MEDIAN, AIM_WORST = 3.0, 10.0


@dataclass(frozen=True)
class Result:
    case: Mapping[str, Any]
    available_gib: float
    tokens: int

    @property
    def available_error(self) -> float:
        return _error(self.available_gib, self.case["logged"]["available_kv_cache_gib"])

    @property
    def tokens_error(self) -> float | None:
        logged = self.case["logged"]["gpu_kv_cache_tokens"]
        return _error(self.tokens, logged) if logged else None


def _error(predicted: float, logged: float) -> float:
    return 100.0 * (predicted - logged) / logged


def load(path: Path = CHECKS_FILE) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["cases"]


def thread_of(url: str) -> str:
    """The source thread of a URL: scheme, query and fragment dropped, trailing slash too."""
    parts = urlsplit(url.strip())
    return f"{parts.netloc.lower()}{parts.path.rstrip('/')}"


def architecture(case: Mapping[str, Any]) -> Architecture:
    """The catalogue's entry for the case's model, else the config.json subset it carries."""
    if "config" in case:
        return from_hf_config(case["config"], name=case["model"], params_total=case.get("params_total"))
    entry = catalog.find(case["model"], catalog.shipped())
    if entry is None:
        raise LookupError(f"{case['id']}: {case['model']} is neither in the catalogue nor carries a config")
    return entry.architecture()


def scratch_spec(case: Mapping[str, Any]) -> SizingSpec:
    """The launch as the calculator sees it: flags and hardware only, no measured term."""
    flags = case["flags"]
    tp, pp = flags["tensor_parallel_size"], flags["pipeline_parallel_size"]
    total = case["gpu_total_gib"]
    return SizingSpec(
        arch=architecture(case),
        gpu=gpu_catalog.get(case["gpu_key"]),
        device_total_bytes=total * GiB if total else None,
        gpus=tp * pp,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        gpu_memory_utilization=flags["gpu_memory_utilization"],
        max_model_len=flags["max_model_len"],
        max_num_seqs=flags["max_num_seqs"],
        max_num_batched_tokens=flags["max_num_batched_tokens"],
        quantization=flags["quantization"],
        kv_cache_dtype=flags["kv_cache_dtype"],
        block_size=flags["block_size"],
        vllm_version=case["vllm_version"],
        enforce_eager=flags["enforce_eager"],
    )


def predict(case: Mapping[str, Any]) -> Result:
    sized = compute(scratch_spec(case))
    return Result(case=case, available_gib=sized.available_kv_bytes / GiB, tokens=sized.capacity.tokens)


@dataclass(frozen=True)
class Score:
    cases: int
    available_median: float
    available_worst: float
    tokens_cases: int
    tokens_median: float | None
    tokens_worst: float | None

    @property
    def meets_aims(self) -> bool:
        pairs = [(self.available_median, self.available_worst)]
        if self.tokens_median is not None and self.tokens_worst is not None:
            pairs.append((self.tokens_median, self.tokens_worst))
        return all(median <= AIM_MEDIAN and worst <= AIM_WORST for median, worst in pairs)


def score(results: Iterable[Result]) -> Score:
    """Median and worst absolute error, in per cent, of the available KV memory and the tokens."""
    results = list(results)
    available = [abs(r.available_error) for r in results]
    tokens = [abs(e) for r in results if (e := r.tokens_error) is not None]
    return Score(
        cases=len(results),
        available_median=statistics.median(available),
        available_worst=max(available),
        tokens_cases=len(tokens),
        tokens_median=statistics.median(tokens) if tokens else None,
        tokens_worst=max(tokens) if tokens else None,
    )


def assign_halves(cases: list[dict[str, Any]]) -> int:
    """Give every case without a half the half of its thread, or, for a new thread, the half
    with fewer cases (threads in order of their hash). Returns how many cases were assigned."""
    known = {thread_of(c["source"]): c["half"] for c in cases if c.get("half")}
    sizes = {half: sum(1 for c in cases if c.get("half") == half) for half in HALVES}
    new = sorted(
        {thread_of(c["source"]) for c in cases if not c.get("half")} - set(known),
        key=lambda t: hashlib.sha256(t.encode()).hexdigest(),
    )
    for thread in new:
        half = min(HALVES, key=lambda h: (sizes[h], HALVES.index(h)))
        known[thread] = half
        sizes[half] += sum(1 for c in cases if thread_of(c["source"]) == thread)
    assigned = 0
    for case in cases:
        if not case.get("half"):
            case["half"], assigned = known[thread_of(case["source"])], assigned + 1
    return assigned


def _fmt(value: float | None, unit: str = "%") -> str:
    return "-" if value is None else f"{value:+.1f}{unit}" if unit == "%" else f"{value:,.2f}"


def table(results: list[Result]) -> str:
    head = f"{'case':44} {'half':4} {'GPU':10} {'model':28} {'KV GiB pred':>11} {'logged':>7} {'err':>7}"
    head += f" {'tokens pred':>12} {'logged':>10} {'err':>7}"
    lines = [head, "-" * len(head)]
    for r in results:
        c = r.case
        logged_tokens = c["logged"]["gpu_kv_cache_tokens"]
        lines.append(
            f"{c['id'][:44]:44} {c.get('half', '?'):4} {c['gpu_key'][:10]:10} {c['model'][-28:]:28} "
            f"{r.available_gib:11.2f} {c['logged']['available_kv_cache_gib']:7.2f} "
            f"{_fmt(r.available_error):>7} {r.tokens:12,} "
            f"{(f'{logged_tokens:,}' if logged_tokens else '-'):>10} {_fmt(r.tokens_error):>7}"
        )
    return "\n".join(lines)


def summary(name: str, s: Score) -> str:
    tokens = (
        f"tokens median {s.tokens_median:.1f} %, worst {s.tokens_worst:.1f} % ({s.tokens_cases} logged)"
        if s.tokens_median is not None
        else "tokens: none logged"
    )
    verdict = "meets" if s.meets_aims else "misses"
    return (
        f"{name:10} {s.cases:3} cases: available KV median {s.available_median:.1f} %, "
        f"worst {s.available_worst:.1f} %; {tokens}; {verdict} the aims "
        f"(median <= {AIM_MEDIAN:g} %, worst <= {AIM_WORST:g} %)"
    )


def report(cases: list[dict[str, Any]]) -> str:
    results = [predict(c) for c in cases]
    lines = [
        "Sizing from scratch: every launch sized from its model, GPU, version and flags only",
        "",
        table(results),
        "",
    ]
    for half in HALVES:
        part = [r for r in results if r.case.get("half") == half]
        if part:
            lines.append(summary(f"{half} half", score(part)))
    lines.append(summary("all", score(results)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", action="store_true", help="give new cases a half, once")
    args = parser.parse_args(argv)
    if args.split:
        data = json.loads(CHECKS_FILE.read_text(encoding="utf-8"))
        assigned = assign_halves(data["cases"])
        CHECKS_FILE.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{assigned} case(s) given a half")
        return 0
    import django

    django.setup()  # the calculator's notes are translatable messages
    print(report(load()))
    return 0


if __name__ == "__main__":
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ops_console.settings")
    sys.exit(main())
