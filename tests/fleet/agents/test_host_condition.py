"""Agent missing, host down or instance down: the console says which."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet.host_condition import (
    AGENT_MISSING,
    AGENT_UP,
    HOST_DOWN,
    HOST_UNREACHABLE,
    NO_AGENT,
    host_condition,
    instance_line,
)

NOW = datetime(2026, 12, 4, 3, 0, tzinfo=UTC)
MISSING_AFTER = timedelta(seconds=90)
TIMED_OUT = ("down", [{"code": "connect.timeout", "severity": "down"}])
REFUSED = ("down", [{"code": "connect.refused", "severity": "down"}])
UP = ("up", [])


def condition(*, heartbeat_ago: float | None, instances, enrolled=True):
    beat = None if heartbeat_ago is None else NOW - timedelta(seconds=heartbeat_ago)
    return host_condition(
        enrolled=enrolled, last_heartbeat_at=beat, missing_after=MISSING_AFTER, instances=instances, now=NOW
    )


def test_a_beating_agent_means_the_host_is_up_and_a_down_instance_is_the_instance():
    seen = condition(heartbeat_ago=12, instances=[REFUSED])
    assert seen.condition == AGENT_UP and seen.host_up is True
    assert "12 s ago" in str(seen.message)
    assert "instance down, host up" in str(instance_line(verdict="down", host=seen))


def test_a_silent_agent_on_a_host_whose_instances_answer_is_only_the_agent_missing():
    for instances in ([UP], [REFUSED], [UP, TIMED_OUT]):
        seen = condition(heartbeat_ago=600, instances=instances)
        assert seen.condition == AGENT_MISSING and seen.host_up is True, instances
        assert "10 min" in str(seen.message)


def test_a_silent_agent_and_no_instance_answering_is_the_host_down():
    seen = condition(heartbeat_ago=600, instances=[TIMED_OUT, TIMED_OUT])
    assert seen.condition == HOST_DOWN and seen.host_up is False
    assert "not only the instance" in str(instance_line(verdict="down", host=seen))


def test_an_agent_that_never_reported_is_missing_not_the_host_down():
    seen = condition(heartbeat_ago=None, instances=[("unknown", [])])
    assert seen.condition == AGENT_MISSING and "never reported" in str(seen.message)


def test_without_an_agent_only_unreachable_instances_say_anything_about_the_host():
    assert condition(heartbeat_ago=None, enrolled=False, instances=[TIMED_OUT]).condition == HOST_UNREACHABLE
    plain = condition(heartbeat_ago=None, enrolled=False, instances=[REFUSED])
    assert plain.condition == NO_AGENT and plain.host_up is None
    assert instance_line(verdict="down", host=plain) is None


def test_an_instance_that_is_up_gets_no_host_line():
    assert instance_line(verdict="up", host=condition(heartbeat_ago=5, instances=[UP])) is None
