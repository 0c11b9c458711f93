"""When no rule is sure: the lines that look most like a failure, and the categories they
come closest to, instead of a confident wrong answer.

The triage keeps the last TAIL_BYTES of a log (a run's failure is near its end), bounded
whatever the log's size. Where no rule matched, each of its lines is weighed: an exception
line ending a traceback weighs most, then a line at ERROR/FATAL level or a panic, then one
with a failure word ("failed", "refused", "timed out"...). The heaviest few are shown in
line order. Each category has a few loose hint words (HINTS, lower case); the categories
whose hints the suspicious lines hold most are the closest candidates, each with the words
that brought it up. They are leads to check, not a verdict.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import re2

TAIL_BYTES = 256 << 10
KEEP_LINES = 6
KEEP_CANDIDATES = 3
LINE_CHARS = 400

_EXCEPTION = re2.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)\b(?:: |$)")
_LEVEL = re2.compile(
    r"\b(?:ERROR|FATAL|CRITICAL|PANIC|level=(?:ERROR|FATAL)|panic:|\[(?:error|crit|alert|emerg)\]|E\d{4} )"
)
_WORDS = re2.compile(
    r"(?i)\b(?:error|errno|exception|traceback|failed|failure|fatal|refused|denied|timed out|timeout"
    r"|killed|abort(?:ed)?|unable|cannot|can't|invalid|not found|unavailable|unreachable|exceeded)\b"
)
_BENIGN = re2.compile(r"(?i)\b(?:0 errors?|no errors?|error_page|errors?=0|debug)\b")

# Loose words per category: they bring a category up as a candidate, never decide it.
HINTS: dict[str, tuple[str, ...]] = {
    "oom.gpu": ("cuda out of memory", "outofmemoryerror", "gpu memory", "vram"),
    "cuda.oom": ("cuda error", "out of memory", "cudamalloc"),
    "oom.cpu": ("oom", "out of memory", "memory pressure", "cannot allocate memory", "ram"),
    "oom.container": ("oomkilled", "memory limit", "cgroup"),
    "oom.kv_pressure": ("kv cache", "preempt", "blocks"),
    "cuda.nccl": ("nccl", "all_reduce", "allreduce", "collective", "/dev/shm", "shm"),
    "cuda.version": ("driver", "cuda version", "libcuda", "cudart", "compute capability", "ptx"),
    "cuda.device_assert": ("assert", "device-side"),
    "cuda.xid": ("xid", "ecc", "nvrm", "fallen off the bus"),
    "model_loading.config": ("config", "architecture", "trust_remote_code", "unrecognized", "not supported",
                             "argument", "tokenizer"),
    "model_loading.corrupt_weights": ("checksum", "corrupt", "incomplete", "truncated", "digest"),
    "model_loading.safetensors": ("safetensors", "header"),
    "model_loading.disk_full": ("no space", "disk", "quota", "ephemeral"),
    "model_loading.not_enough_memory": ("load", "loading", "weights", "checkpoint", "allocate"),
    "process.crash": ("segfault", "sigsegv", "core dumped", "signal", "crash", "panic", "abort"),
    "process.killed": ("killed", "sigkill", "137", "terminated"),
    "process.not_started": ("failed to start", "exited", "not running", "permission denied", "no such file",
                            "connection refused", "address already in use"),
    "process.hung": ("hang", "hung", "stuck", "no progress", "deadlock"),
    "timeout.ttft": ("timed out", "timeout", "first token", "read timeout"),
    "timeout.connect": ("connect timeout", "connection timed out", "no route to host", "unreachable"),
    "timeout.network": ("reset by peer", "broken pipe", "name resolution", "dns", "disconnected"),
    "rate_limit.http_429": ("429", "rate limit", "too many requests"),
    "rate_limit.token_quota": ("quota", "tokens per min", "budget"),
    "rate_limit.queue": ("queue", "overloaded", "busy", "waiting"),
    "server.5xx": ("500", "502", "503", "504", "internal server error", "bad gateway"),
    "network.tls": ("ssl", "tls", "certificate", "x509"),
    "client.error": ("400", "401", "403", "bad request", "api key", "unauthorized", "invalid request"),
    "config.model_name": ("model not found", "does not exist", "unknown model"),
    "probe.metrics": ("/metrics", "prometheus", "scrape"),
    "timeout.tps": ("tokens/s", "tokens per second", "stream", "slow"),
    "process.engine_dead": ("enginedead", "engine dead", "engine core", "died"),
    "process.unresponsive": ("health check", "unhealthy", "not responding"),
    "gpu.thermal": ("thermal", "throttl", "temperature", "overheat"),
    "gpu.numa": ("numa",),
}  # fmt: skip


@dataclass(frozen=True)
class Suspicious:
    line: int
    text: str
    weight: int


def _weight(text: str) -> int:
    if _EXCEPTION.search(text):
        return 3
    if _BENIGN.search(text):
        return 0
    if _LEVEL.search(text):
        return 2
    return 1 if _WORDS.search(text) else 0


def suspicious_lines(tail: bytes, *, first_line: int) -> list[Suspicious]:
    """The heaviest suspicious lines of the tail, in line order; `first_line` is the tail's
    first line number in the whole log."""
    found = []
    for offset, raw in enumerate(tail.split(b"\n")):
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        weight = _weight(text)
        if weight:
            found.append(Suspicious(first_line + offset, text[:LINE_CHARS], weight))
    best = sorted(found, key=lambda s: (-s.weight, -s.line))[:KEEP_LINES]
    return sorted(best, key=lambda s: s.line)


def candidates(lines: list[Suspicious]) -> list[dict[str, Any]]:
    """The categories whose hint words the suspicious lines hold most, with those words."""
    scores: Counter[str] = Counter()
    words: dict[str, list[str]] = {}
    for line in lines:
        lower = line.text.lower()
        for category, hints in HINTS.items():
            hit = [h for h in hints if h in lower]
            if hit:
                scores[category] += line.weight * len(hit)
                known = words.setdefault(category, [])
                known += [h for h in hit if h not in known]
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:KEEP_CANDIDATES]
    return [{"category": category, "hints": words[category]} for category, _ in ranked]


def look(tail: bytes, *, first_line: int) -> dict[str, Any] | None:
    """What to show when no rule is sure; None when nothing in the tail looks like a failure."""
    lines = suspicious_lines(tail, first_line=first_line)
    if not lines:
        return None
    return {
        "lines": [{"line": s.line, "text": s.text} for s in lines],
        "candidates": candidates(lines),
    }
