"""Log triage of a generated mixed log (vLLM, nginx access and error, kernel lines with a few
failures spread through it) against `grep -E -c` with the same patterns on the same file.

Prints both times, the ratio (aim: at most 1.1x grep), the throughput and the triage's peak
memory growth, which stays bounded whatever the file's size.
"""

from __future__ import annotations

import os
import random
import re
import resource
import shutil
import subprocess
import tempfile
import time

from benchmarks import aims
from diagnostics.triage.engine import triage_path
from diagnostics.triage.rules import shipped

BLOCK_LINES = (
    "INFO 12-03 03:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 1234.5 tokens/s, "
    "Avg generation throughput: 56.7 tokens/s, Running: 12 reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: 34.5%, Prefix cache hit rate: 12.3%",
    '10.0.3.{ip} - - [03/Dec/2026:03:00:{s:02d} +0000] "POST /v1/chat/completions HTTP/1.1" 200 1834 "-" '
    '"OpenAI/Python 1.54.0"',
    'INFO:     10.0.3.{ip}:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "Dec 03 03:00:{s:02d} gpu-node-03 kernel: [123456.{ip}] eth0: link up, 100Gbps, full-duplex",
    "2026/12/03 03:00:{s:02d} [info] 12#12: *{ip} client closed keepalive connection",
)
FAILURES = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 79.19 GiB",
    "Dec 03 03:00:02 gpu-node-03 kernel: Out of memory: Killed process 4242 (python3) total-vm:98765432kB",
    "2026/12/03 03:00:05 [error] 12#12: *9 upstream timed out (110: Connection timed out) "
    "while reading response header from upstream",
)


def generate(path: str, size_mb: int) -> int:
    """Write about size_mb MB of mixed log lines, one failure line per ~4 MB."""
    rng = random.Random(7)
    block = "\n".join(
        rng.choice(BLOCK_LINES).format(s=rng.randrange(60), ip=rng.randrange(256)) for _ in range(8000)
    )
    block_bytes = (block + "\n").encode()
    written = 0
    with open(path, "wb") as out:
        while written < size_mb << 20:
            out.write(block_bytes)
            written += len(block_bytes)
            if rng.random() < len(block_bytes) / (4 << 20):
                line = (rng.choice(FAILURES) + "\n").encode()
                out.write(line)
                written += len(line)
    return written


def grep_pattern() -> str:
    """The rules' RE2 patterns as one POSIX ERE for grep -E (case folded with -i, as the
    rules' (?i) patterns need)."""
    parts = []
    for rule in shipped():
        for pattern in rule.patterns:
            ere = re.sub(r"\(\?[a-z]+\)", "", pattern).replace("(?:", "(")
            ere = ere.replace(r"\d", "[0-9]").replace(r"\s", "[[:space:]]").replace(r"\S", "[^[:space:]]")
            ere = ere.replace(r"\w", "[[:alnum:]_]").replace(r"\b", "")
            parts.append(ere)
    return "|".join(parts)


def _time(call) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def run(*, size_mb: int = 1024, repeat: int = 2) -> int:
    folder = tempfile.mkdtemp(prefix="ops-triage-bench-")
    try:
        path = os.path.join(folder, "mixed.log")
        if shutil.disk_usage(folder).free < (size_mb << 20) * 2:
            print(f"triage benchmark: not enough free disk for a {size_mb} MB log; skipped")
            return 1
        gen_s, written = _time(lambda: generate(path, size_mb))
        pattern = grep_pattern()
        size = written / (1 << 20)
        print(f"triage benchmark: {size:,.0f} MB generated in {gen_s:.1f} s, {len(shipped())} rules")
        grep_runs, triage_runs = [], []
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = None
        for _ in range(repeat):
            grep_s, done = _time(
                lambda: subprocess.run(
                    ["grep", "-E", "-i", "-c", pattern, path], capture_output=True, text=True
                )
            )
            grep_runs.append(grep_s)
            triage_s, result = _time(lambda: triage_path(path))
            triage_runs.append(triage_s)
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        grep_best, triage_best = min(grep_runs), min(triage_runs)
        matched_lines = done.stdout.strip()
        print(f"  grep -E -i -c (best of {repeat}): {grep_best:.2f} s  ({matched_lines} matching lines)")
        print(f"  triage (best of {repeat}): {triage_best:.2f} s  ({size / triage_best:,.0f} MB/s)")
        ratio, growth_mib = triage_best / grep_best, (rss_after - rss_before) / 1024
        print(f"  ratio triage / grep: {ratio:.2f}   (aim: <= 1.1)")
        print(f"  peak RSS growth during triage: {growth_mib:.0f} MiB   (aim: <= 50)")
        aims.note("triage / grep -E -c", ratio, 1.1)
        aims.note("triage extra memory", growth_mib, 50, unit=" MiB")
        print(f"  found: {result.category} first, then {[f.category for f in result.findings[1:]]}")
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)
