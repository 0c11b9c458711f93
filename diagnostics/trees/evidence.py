"""Answers a walkthrough can take from live data: probe conditions, read from an instance's
latest probe results and the findings the classifier stored with their evidence
("TTFB 7.2 s > 5 s, so TTFT"). A condition is true when a finding of its category is there,
false when a probe kind that would have found it ran and did not, unknown otherwise.

A condition reads the findings it names in MATCHES (finding codes or taxonomy categories);
a condition not listed there reads the findings of the category of its own name. A condition
in ANY_OF holds when one of its parts does (the first that holds gives the evidence).

The evidence is kept as a message (core.i18n) as well as in English, so that a walkthrough
shows it, and a saved one keeps it, in the reader's language: the findings' own evidence
where the probes stored it as a message, the conditions' sentences from this catalogue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext_noop

from core.i18n import Message, later

# condition -> (what it means, the probe kinds that measure it)
CONDITIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "reachable": (gettext_noop("the engine answers /health"), ("health",)),
    "refused": (gettext_noop("connections are refused: nothing listens on the port"), ("health",)),
    "failing": (
        gettext_noop("requests fail: refused, unanswered, an error status or ended in error"),
        ("health", "metrics"),
    ),
    "timeout.connect": (gettext_noop("connecting takes over 1 s or fails"), ("health",)),
    "timeout.network": (gettext_noop("requests are lost or reset in the network"), ("health",)),
    "timeout.ttft": (gettext_noop("time to first token (TTFB) over 5 s"), ("health", "stream")),
    "timeout.tps": (
        gettext_noop("generation is slow (total - TTFB large, tokens/s low)"),
        ("health", "stream"),
    ),
    "rate_limit.http_429": (gettext_noop("requests get HTTP 429"), ("health", "stream")),
    "rate_limit.queue": (gettext_noop("more than 10 requests waiting, or the batch is full"), ("metrics",)),
    "oom.kv_pressure": (gettext_noop("KV cache full with preemptions or waiting requests"), ("metrics",)),
    "errors.requests": (gettext_noop("requests finish with abort or error"), ("health", "stream", "metrics")),
    "errors.http_5xx": (gettext_noop("requests or /health get HTTP 500, 502 or 503"), ("health", "stream")),
    "process.engine_dead": (gettext_noop("/health says the engine is dead (500/503)"), ("health",)),
    "process.gone": (gettext_noop("the engine's process is gone from the GPU"), ("gpu",)),
    "process.hung": (gettext_noop("the engine answers but makes no progress"), ("metrics",)),
    "gpu.thermal": (gettext_noop("GPU hot or throttling for temperature"), ("gpu",)),
    "gpu.power": (gettext_noop("GPU throttling for power"), ("gpu",)),
    "gpu.saturated": (gettext_noop("GPU SM utilization over 95 %"), ("gpu",)),
    "gpu.xid": (gettext_noop("XID errors on the GPU"), ("gpu",)),
    "gpu.ecc": (gettext_noop("ECC errors on the GPU"), ("gpu",)),
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


# The probe kinds, as the evidence names them.
KINDS: dict[str, str] = {
    "health": gettext_noop("health"),
    "stream": gettext_noop("stream"),
    "metrics": gettext_noop("metrics"),
    "gpu": gettext_noop("gpu"),
}


def _matches(finding: dict[str, Any], names: frozenset[str]) -> bool:
    return finding.get("code") in names or finding.get("category") in names


def finding_evidence(finding: dict[str, Any]) -> Message | str:
    """A finding's evidence: the message the probes stored with it, else its English text."""
    stored = finding.get("evidence_message")
    if isinstance(stored, dict) and "msgid" in stored:
        try:
            return Message.from_json(stored)
        except (KeyError, TypeError, ValueError):
            pass
    return finding.get("evidence") or ""


def joined(parts: list[Message | str], msgid: str = gettext_noop("%(earlier)s; %(later)s")) -> Message | str:
    """One message for several, in order ("a; b; c")."""
    result = parts[0] if parts else ""
    for part in parts[1:]:
        result = later(msgid, earlier=result, later=part)
    return result


@dataclass(frozen=True)
class Reading:
    value: bool | None  # None: not measured
    evidence: str  # in English, as the API and the saved walkthroughs' text keep it
    message: Message | str = ""  # the same, to show in the reader's language

    @classmethod
    def of(cls, value: bool | None, message: Message | str) -> Reading:
        return cls(value, str(message), message)


def read(condition: str, *, findings: list[dict[str, Any]], measured: set[str]) -> Reading:
    """One condition against an instance's findings and the probe kinds measured."""
    negate = condition.startswith("not ")
    name = condition.removeprefix("not ").strip()
    reading = _read(name, findings, measured)
    if negate and reading.value is not None:
        return Reading(not reading.value, reading.evidence, reading.message)
    return reading


def _read(name: str, findings: list[dict[str, Any]], measured: set[str]) -> Reading:
    if name in ANY_OF:
        return _read_any(ANY_OF[name], findings, measured)
    label, kinds = CONDITIONS[name]
    if name == "reachable":
        down = [f for f in findings if f.get("category") in _UNREACHABLE and f.get("source") == "readiness"]
        if down:
            return Reading.of(False, finding_evidence(down[0]) or later("the health probe failed"))
        if "health" in measured:
            return Reading.of(True, later("the health probe got an answer"))
        return Reading(None, "")
    hits = [f for f in findings if _matches(f, MATCHES.get(name, frozenset({name})))]
    if hits:
        said = [e for e in map(finding_evidence, hits) if e]
        return Reading.of(True, joined(said) if said else later(label))
    ran = sorted(measured & set(kinds))
    if ran:
        probes = joined([later(KINDS.get(kind, kind)) for kind in ran], gettext_noop("%(earlier)s/%(later)s"))
        return Reading.of(
            False,
            later(
                "the latest %(probes)s probe found no sign that %(what)s", probes=probes, what=later(label)
            ),
        )
    return Reading(None, "")


def _read_any(parts: tuple[str, ...], findings: list[dict[str, Any]], measured: set[str]) -> Reading:
    """True on the first part that holds; false only when every part was measured false."""
    readings = [read(part, findings=findings, measured=measured) for part in parts]
    held = next((r for r in readings if r.value), None)
    if held is not None:
        return held
    if all(r.value is False for r in readings):
        return Reading.of(False, joined([r.message for r in readings]))
    return Reading(None, "")
