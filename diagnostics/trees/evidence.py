"""Answers a walkthrough can take from live data: probe conditions, read from an instance's
latest probe results and the findings the classifier stored with their evidence
("TTFB 7.2 s > 5 s, so TTFT"). A condition is true when a finding of its category is there,
false when a probe kind that would have found it ran and did not, unknown otherwise.

A condition reads the findings it names in MATCHES (finding codes or taxonomy categories);
a condition not listed there reads the findings of the category of its own name. A condition
in ANY_OF holds when one of its parts does (the first that holds gives the evidence)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# condition -> (what it means, the probe kinds that measure it)
CONDITIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "reachable": ("the engine answers /health", ("health",)),
    "refused": ("connections are refused: nothing listens on the port", ("health",)),
    "failing": (
        "requests fail: refused, unanswered, an error status or ended in error",
        ("health", "metrics"),
    ),
    "timeout.connect": ("connecting takes over 1 s or fails", ("health",)),
    "timeout.network": ("requests are lost or reset in the network", ("health",)),
    "timeout.ttft": ("time to first token (TTFB) over 5 s", ("health", "stream")),
    "timeout.tps": ("generation is slow (total - TTFB large, tokens/s low)", ("health", "stream")),
    "rate_limit.http_429": ("requests get HTTP 429", ("health", "stream")),
    "rate_limit.queue": ("more than 10 requests waiting, or the batch is full", ("metrics",)),
    "oom.kv_pressure": ("KV cache full with preemptions or waiting requests", ("metrics",)),
    "errors.requests": ("requests finish with abort or error", ("health", "stream", "metrics")),
    "errors.http_5xx": ("requests or /health get HTTP 500, 502 or 503", ("health", "stream")),
    "process.engine_dead": ("/health says the engine is dead (500/503)", ("health",)),
    "process.gone": ("the engine's process is gone from the GPU", ("gpu",)),
    "process.hung": ("the engine answers but makes no progress", ("metrics",)),
    "gpu.thermal": ("GPU hot or throttling for temperature", ("gpu",)),
    "gpu.power": ("GPU throttling for power", ("gpu",)),
    "gpu.saturated": ("GPU SM utilization over 95 %", ("gpu",)),
    "gpu.xid": ("XID errors on the GPU", ("gpu",)),
    "gpu.ecc": ("ECC errors on the GPU", ("gpu",)),
}
# Where a condition's name is not the category of its findings (the probes' categories
# are taxonomy keys; the trees ask finer or coarser questions): codes or categories.
MATCHES: dict[str, frozenset[str]] = {
    "timeout.connect": frozenset({"timeout.connect", "network.tls", "connect.refused", "process.gone"}),
    "refused": frozenset({"connect.refused", "process.gone"}),
    "errors.requests": frozenset({"requests.failing", "request.failed"}),
    "errors.http_5xx": frozenset({"server.5xx", "process.engine_dead"}),
    # kv.high (usage high, nothing waiting) is the cache doing its job, not pressure
    "oom.kv_pressure": frozenset({"kv.pressure", "kv.preemptions"}),
    "process.gone": frozenset({"process.gone"}),
    "process.hung": frozenset({"process.hung", "process.unresponsive"}),
    "gpu.thermal": frozenset({"gpu.thermal", "gpu.hot"}),
    "gpu.power": frozenset({"gpu.power_brake", "gpu.power_cap"}),
    "gpu.saturated": frozenset({"gpu.saturated"}),
    "gpu.xid": frozenset({"gpu.xid"}),
    "gpu.ecc": frozenset({"gpu.ecc"}),
}
ANY_OF: dict[str, tuple[str, ...]] = {
    "failing": ("not reachable", "errors.requests"),
}
# Findings that mean the engine did not answer its health route.
_UNREACHABLE = frozenset(
    {"timeout.connect", "timeout.network", "network.tls", "process.not_started", "process.unresponsive",
     "process.engine_dead", "server.5xx"}
)  # fmt: skip


def _matches(finding: dict[str, Any], names: frozenset[str]) -> bool:
    return finding.get("code") in names or finding.get("category") in names


@dataclass(frozen=True)
class Reading:
    value: bool | None  # None: not measured
    evidence: str


def read(condition: str, *, findings: list[dict[str, Any]], measured: set[str]) -> Reading:
    """One condition against an instance's findings and the probe kinds measured."""
    negate = condition.startswith("not ")
    name = condition.removeprefix("not ").strip()
    reading = _read(name, findings, measured)
    if negate and reading.value is not None:
        return Reading(not reading.value, reading.evidence)
    return reading


def _read(name: str, findings: list[dict[str, Any]], measured: set[str]) -> Reading:
    if name in ANY_OF:
        return _read_any(ANY_OF[name], findings, measured)
    label, kinds = CONDITIONS[name]
    if name == "reachable":
        down = [f for f in findings if f.get("category") in _UNREACHABLE and f.get("source") == "readiness"]
        if down:
            return Reading(False, down[0].get("evidence") or "the health probe failed")
        return Reading(True, "the health probe got an answer") if "health" in measured else Reading(None, "")
    hits = [f for f in findings if _matches(f, MATCHES.get(name, frozenset({name})))]
    if hits:
        return Reading(True, "; ".join(f.get("evidence", "") for f in hits if f.get("evidence")) or label)
    if measured & set(kinds):
        return Reading(
            False, f"the latest {'/'.join(sorted(measured & set(kinds)))} probe found no sign that {label}"
        )
    return Reading(None, "")


def _read_any(parts: tuple[str, ...], findings: list[dict[str, Any]], measured: set[str]) -> Reading:
    """True on the first part that holds; false only when every part was measured false."""
    readings = [read(part, findings=findings, measured=measured) for part in parts]
    held = next((r for r in readings if r.value), None)
    if held is not None:
        return held
    if all(r.value is False for r in readings):
        return Reading(False, "; ".join(r.evidence for r in readings))
    return Reading(None, "")
