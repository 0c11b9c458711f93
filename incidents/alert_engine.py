"""Alert rule states over time, like Prometheus's `for`: a condition that starts to hold makes
a rule pending; held for `for_seconds` it fires; when it stops holding a firing rule
resolves and a pending one goes back to inactive. Plain Python: time is a parameter, so the
tests run it over simulated minutes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

INACTIVE, PENDING, FIRING = "inactive", "pending", "firing"


@dataclass(frozen=True)
class RuleSpec:
    key: str
    signal: str
    comparison: str  # above, below
    threshold: float
    for_seconds: float

    def holds(self, value: float | None) -> bool:
        """A missing value does not hold (like a series that vanished in Prometheus)."""
        if value is None:
            return False
        return value > self.threshold if self.comparison == "above" else value < self.threshold


@dataclass(frozen=True)
class StateSpec:
    state: str = INACTIVE
    active_since: datetime | None = None
    fired_at: datetime | None = None


def step(
    rule: RuleSpec, state: StateSpec, value: float | None, now: datetime
) -> tuple[StateSpec, str | None]:
    """The rule's next state and the transition ("fire", "resolve" or None)."""
    if rule.holds(value):
        if state.state == INACTIVE:
            state = StateSpec(PENDING, active_since=now)
        if state.state == PENDING and now - state.active_since >= timedelta(seconds=rule.for_seconds):
            return replace(state, state=FIRING, fired_at=now), "fire"
        return state, None
    if state.state == FIRING:
        return StateSpec(INACTIVE), "resolve"
    return StateSpec(INACTIVE), None
