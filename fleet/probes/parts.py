"""The four probe kinds, and one instance's latest result of each, stored and read back.

Each kind runs on its own schedule: health (readiness routes and the latency phases of a
one-token request), stream (the streaming chat probe), metrics (the /metrics scrape and
the rates derived from it) and gpu (NVML). An instance is judged on the latest result of
every kind together, so a health probe at 12:00:30 is classified with the metrics scraped
at 12:00:15; a kind whose latest result has gone stale is left out of the judgement.

`ProbeParts` is that set of latest results. It goes to JSON per kind (`to_kind_dicts`)
and comes back (`ProbeParts.from_kind_dicts`); a stored kind that no longer reads is
dropped, never fatal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from fleet.nvml.base import NvmlReading
from fleet.probes.gpu import GpuProbeResult
from fleet.probes.outcomes import Outcome
from fleet.probes.phases import PhaseResult
from fleet.probes.readiness import ReadinessResult, RouteCheck
from fleet.probes.scrape import ScrapeResult
from fleet.probes.streaming import StreamResult


class ProbeKind(StrEnum):
    HEALTH = "health"
    STREAM = "stream"
    METRICS = "metrics"
    GPU = "gpu"


ALL_KINDS: frozenset[ProbeKind] = frozenset(ProbeKind)

# Which kind a finding's source belongs to: the kind whose failures it counts against.
KIND_OF_SOURCE: dict[str, ProbeKind] = {
    "readiness": ProbeKind.HEALTH,
    "phases": ProbeKind.HEALTH,
    "stream": ProbeKind.STREAM,
    "metrics": ProbeKind.METRICS,
    "gpu": ProbeKind.GPU,
}

_FIELDS_OF_KIND: dict[ProbeKind, tuple[str, ...]] = {
    ProbeKind.HEALTH: ("readiness", "phases", "gateway_phases"),
    ProbeKind.STREAM: ("stream",),
    ProbeKind.METRICS: ("scrape_result", "derived"),
    ProbeKind.GPU: ("gpus",),
}


def kind_of_source(source: str) -> ProbeKind:
    """A finding from an unknown source (the rules' own failure) counts as health."""
    return KIND_OF_SOURCE.get(source, ProbeKind.HEALTH)


def parse_kinds(names: Iterable[str]) -> frozenset[ProbeKind]:
    """Kinds from their names; ValueError naming the unknown ones."""
    names = list(names)
    unknown = [n for n in names if n not in ProbeKind._value2member_map_]
    if unknown:
        known = ", ".join(k.value for k in ProbeKind)
        raise ValueError(f"unknown probe kind {', '.join(map(repr, unknown))} (known: {known})")
    return frozenset(ProbeKind(n) for n in names)


def _flat(cls: type, data: Mapping[str, Any], **nested: Any) -> Any:
    """A flat result dataclass from its to_dict(); derived keys (decode_gap_s, ...) ignored."""
    names = {f.name for f in fields(cls)}
    values = {k: v for k, v in data.items() if k in names}
    if "outcome" in values:
        values["outcome"] = Outcome(values["outcome"])
    return cls(**values | nested)


def _readiness(data: Mapping[str, Any]) -> ReadinessResult:
    return _flat(
        ReadinessResult,
        data,
        models=tuple(data.get("models") or ()),
        checks=tuple(_flat(RouteCheck, c) for c in data.get("checks") or ()),
    )


def _scrape_result(data: Mapping[str, Any]) -> ScrapeResult:
    # The parsed page itself is kept apart (InstanceState.last_scrape), for rates only.
    return _flat(ScrapeResult, data, scrape=None)


def _gpus(data: Mapping[str, Any]) -> GpuProbeResult:
    reading = data.get("reading")
    return _flat(GpuProbeResult, data, reading=NvmlReading.from_dict(reading) if reading else None)


_READERS = {
    "readiness": _readiness,
    "phases": lambda d: _flat(PhaseResult, d),
    "gateway_phases": lambda d: _flat(PhaseResult, d),
    "stream": lambda d: _flat(StreamResult, d),
    "scrape_result": _scrape_result,
    "derived": lambda d: {str(k): float(v) for k, v in d.items()},
    "gpus": _gpus,
}


@dataclass(frozen=True, kw_only=True)
class ProbeParts:
    """The latest result of each probe kind of one instance; None where not measured."""

    readiness: ReadinessResult | None = None
    phases: PhaseResult | None = None
    gateway_phases: PhaseResult | None = None  # the same one-token request through the gateway
    stream: StreamResult | None = None
    scrape_result: ScrapeResult | None = None
    derived: Mapping[str, float] = field(default_factory=dict)
    gpus: GpuProbeResult | None = None

    def to_kind_dicts(self, kinds: Iterable[ProbeKind]) -> dict[str, dict[str, Any]]:
        """JSON for each of `kinds`: what InstanceState keeps per kind."""
        out = {}
        for kind in kinds:
            out[kind.value] = {name: self._field_dict(name) for name in _FIELDS_OF_KIND[kind]}
        return out

    def _field_dict(self, name: str) -> Any:
        value = getattr(self, name)
        if name == "derived":
            return dict(value)
        if name == "scrape_result":
            return value.to_dict(with_scrape=False) if value else None
        return value.to_dict() if value else None

    @classmethod
    def from_kind_dicts(cls, stored: Mapping[str, Mapping[str, Any]]) -> ProbeParts:
        """Read back what to_kind_dicts wrote; a kind that no longer reads is left out."""
        values: dict[str, Any] = {}
        for kind in ProbeKind:
            data = stored.get(kind.value)
            if not isinstance(data, Mapping):
                continue
            try:
                read = {n: _READERS[n](data[n]) for n in _FIELDS_OF_KIND[kind] if data.get(n) is not None}
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            values.update(read)
        return cls(**values)

    def overlaid(self, fresh: ProbeParts, kinds: Iterable[ProbeKind]) -> ProbeParts:
        """These parts with the parts of `kinds` taken from `fresh`."""
        taken = {name: getattr(fresh, name) for kind in kinds for name in _FIELDS_OF_KIND[kind]}
        return replace(self, **taken)
