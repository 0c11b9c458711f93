"""Rule states over simulated time, like Prometheus's `for`."""

from datetime import UTC, datetime, timedelta

from incidents.alert_engine import FIRING, INACTIVE, PENDING, RuleSpec, StateSpec, step

T0 = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
KV = RuleSpec("kv_cache_high", "kv_cache_usage", "above", 0.95, 120)


def run(rule, samples):
    """samples: (seconds after T0, value); returns the transitions with their times."""
    state, events = StateSpec(), []
    for seconds, value in samples:
        state, transition = step(rule, state, value, T0 + timedelta(seconds=seconds))
        if transition:
            events.append((transition, seconds))
    return state, events


def test_a_condition_must_hold_for_its_duration_before_it_fires():
    state, events = run(KV, [(0, 0.97), (30, 0.98), (90, 0.99), (120, 0.99), (150, 0.99)])
    assert events == [("fire", 120)] and state.state == FIRING and state.active_since == T0


def test_a_short_spike_never_fires_and_the_clock_restarts():
    state, events = run(KV, [(0, 0.97), (60, 0.5), (90, 0.97), (180, 0.97), (210, 0.97)])
    assert events == [("fire", 210)]


def test_a_firing_rule_resolves_when_the_condition_stops_holding():
    state, events = run(KV, [(0, 0.99), (120, 0.99), (150, 0.4)])
    assert events == [("fire", 120), ("resolve", 150)] and state.state == INACTIVE


def test_missing_data_does_not_hold_and_a_pending_rule_goes_back():
    state, events = run(KV, [(0, 0.99), (60, None)])
    assert events == [] and state.state == INACTIVE
    pending, _ = run(KV, [(0, 0.99)])
    assert pending.state == PENDING


def test_a_rule_with_no_duration_fires_at_once_and_below_rules_compare_the_other_way():
    assert run(RuleSpec("x", "s", "above", 0, 0), [(0, 1)])[1] == [("fire", 0)]
    assert run(RuleSpec("y", "s", "below", 10, 60), [(0, 5), (60, 5)])[1] == [("fire", 60)]
