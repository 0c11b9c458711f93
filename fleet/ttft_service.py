"""The TTFT breakdown of one instance, from what the probes stored.

The Django edge of fleet.probes.ttft_breakdown: it reads the instance's latest results
(InstanceState.kinds: the stream probe's TTFT, the health probe's phases, direct and
through the gateway, the metrics probe's derived figures), leaves out a kind whose result
has gone stale (the same windows as the verdict, fleet.probe_service.stale_after), and
splits the TTFT as the judgement does for a TTFT finding's evidence. docs/ttft-breakdown.md
describes the parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from fleet.models import Instance, InstanceState
from fleet.probe_service import STALE_FLOOR, stale_after, target_for
from fleet.probes.judgement import ttft_inputs_of
from fleet.probes.parts import ProbeParts
from fleet.probes.ttft_breakdown import Breakdown, split


@dataclass(frozen=True)
class TtftView:
    """The breakdown and when each of its sources was measured (None: not used)."""

    breakdown: Breakdown
    stream_at: datetime | None = None
    health_at: datetime | None = None
    metrics_at: datetime | None = None


def _fresh(state: InstanceState, kind: str, now: datetime) -> tuple[dict, datetime | None]:
    """The kind's latest result and when it was measured; ({}, None) when none, stale or
    not readable (a row written by an older console)."""
    try:
        at = state.measured_at(kind)
        result = state.kind_result(kind)
    except (AttributeError, TypeError, ValueError):
        return {}, None
    if at is None or not isinstance(result, dict) or now - at > stale_after().get(kind, STALE_FLOOR):
        return {}, None
    return result, at


def breakdown_for(instance: Instance, *, now: datetime | None = None) -> TtftView | None:
    """The instance's TTFT breakdown; None when nothing it needs was measured recently."""
    state = getattr(instance, "state", None)  # the reverse one-to-one raises when missing
    if state is None or not instance.enabled:
        return None
    now = now or timezone.now()
    fresh = {kind: _fresh(state, kind, now) for kind in ("stream", "health", "metrics")}
    parts = ProbeParts.from_kind_dicts({kind: result for kind, (result, _at) in fresh.items() if result})
    inputs = ttft_inputs_of(target_for(instance), parts)
    if not inputs.anything:
        return None
    return TtftView(
        breakdown=split(inputs),
        stream_at=fresh["stream"][1] if parts.stream else None,
        health_at=fresh["health"][1] if parts.phases else None,
        metrics_at=fresh["metrics"][1] if parts.derived else None,
    )
