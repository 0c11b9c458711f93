"""Which is it: the agent, the host or the instance? (docs/host-agent.md)

An instance the probes call down can be a dead engine on a live host, or a dead host. The
host's agent and the way the instance failed tell them apart:

  agent up        the agent heartbeats: the host is up, whatever its instances do
  agent missing   the agent is silent, but an instance on the host still answers (or
                  refuses the connection, which only a running kernel does): the host is
                  up and only the agent is gone
  host down       the agent is silent and no instance on the host answers at all (connect
                  timeouts, DNS failures): the host itself is unreachable
  no agent        no agent enrolled; "host unreachable" when no instance answers either

An instance's own line says "instance down, host up" when the host is known to be up."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils.translation import gettext_lazy

from core.i18n import Message, later

# A down instance whose readiness failed like this did not reach the host at all.
UNREACHABLE_CODES = frozenset({"connect.timeout", "dns.failure"})

AGENT_UP, AGENT_MISSING, HOST_DOWN, NO_AGENT, HOST_UNREACHABLE = (
    "agent_up",
    "agent_missing",
    "host_down",
    "no_agent",
    "host_unreachable",
)


# Each condition as the badges word it (host page, overview).
LABELS = {
    AGENT_UP: gettext_lazy("agent up"),
    AGENT_MISSING: gettext_lazy("agent missing"),
    HOST_DOWN: gettext_lazy("host down"),
    HOST_UNREACHABLE: gettext_lazy("host unreachable"),
    NO_AGENT: gettext_lazy("no agent"),
}


@dataclass(frozen=True, kw_only=True)
class HostCondition:
    condition: str
    message: Message

    @property
    def label(self) -> str:
        return str(LABELS[self.condition])

    @property
    def host_up(self) -> bool | None:
        """True when the host is known up, False when known down, None when unknown."""
        if self.condition in (AGENT_UP, AGENT_MISSING):
            return True
        if self.condition in (HOST_DOWN, HOST_UNREACHABLE):
            return False
        return None


def unreachable(*, verdict: str, findings: Sequence[Mapping[str, Any]]) -> bool:
    """Did the instance fail without reaching its host (down, by connect timeout or DNS)?"""
    return verdict in ("down", "failing") and any(
        f.get("code") in UNREACHABLE_CODES and f.get("severity") == "down" for f in findings
    )


def ago(since: datetime, now: datetime) -> str:
    """How long ago, as the pages and messages say it: seconds under two minutes, then minutes."""
    seconds = max(0, int((now - since).total_seconds()))
    return f"{seconds // 60} min" if seconds >= 120 else f"{seconds} s"


def host_condition(
    *,
    enrolled: bool,
    last_heartbeat_at: datetime | None,
    missing_after: timedelta,
    instances: Iterable[tuple[str, Sequence[Mapping[str, Any]]]],
    now: datetime,
) -> HostCondition:
    """The host's condition from its agent's heartbeat and its instances' (verdict,
    findings) pairs. Instances never probed (unknown) say nothing either way."""
    probed = [(v, f) for v, f in instances if v != "unknown"]
    all_unreachable = bool(probed) and all(unreachable(verdict=v, findings=f) for v, f in probed)
    fresh = last_heartbeat_at is not None and now - last_heartbeat_at <= missing_after
    if enrolled and fresh:
        return HostCondition(
            condition=AGENT_UP,
            message=later("host up: its agent reported %(ago)s ago", ago=ago(last_heartbeat_at, now)),
        )
    if enrolled:
        silent = (
            later("no heartbeat for %(ago)s", ago=ago(last_heartbeat_at, now))
            if last_heartbeat_at
            else later("it has never reported")
        )
        if all_unreachable:
            return HostCondition(
                condition=HOST_DOWN,
                message=later(
                    "host down: its agent is silent (%(silent)s) and no instance on it answers", silent=silent
                ),
            )
        if probed:
            return HostCondition(
                condition=AGENT_MISSING,
                message=later(
                    "agent missing (%(silent)s); the host is up: its instances answer", silent=silent
                ),
            )
        return HostCondition(
            condition=AGENT_MISSING, message=later("agent missing (%(silent)s)", silent=silent)
        )
    if all_unreachable:
        return HostCondition(
            condition=HOST_UNREACHABLE,
            message=later("host unreachable: no instance on it answers (no agent to ask)"),
        )
    return HostCondition(condition=NO_AGENT, message=later("no agent on this host"))


def instance_line(*, verdict: str, host: HostCondition) -> Message | None:
    """What a down instance's page adds about its host, None when there is nothing to add."""
    if verdict not in ("down", "failing"):
        return None
    if host.host_up:
        return later("instance down, host up (%(host)s)", host=host.message)
    if host.host_up is False:
        return later("the host is down, not only the instance (%(host)s)", host=host.message)
    return None
