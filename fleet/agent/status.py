"""A host's condition (fleet.host_condition) from the database: its agent's heartbeat and
its instances' latest verdicts and findings."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from fleet.agent.dispatch import port_of
from fleet.agent.host_view import OnHost, on_host
from fleet.host_condition import HostCondition, host_condition
from fleet.hostchecks.memory import rss_trend
from fleet.models import GpuHost, HostAgent, Instance, InstanceState, MetricSample


def agent_of(host: GpuHost) -> HostAgent | None:
    try:
        return host.agent
    except HostAgent.DoesNotExist:
        return None


def condition_of(host: GpuHost) -> HostCondition:
    """The host's condition, from its agent's heartbeat and its enabled instances' states."""
    agent = agent_of(host)
    states = InstanceState.objects.filter(instance__host=host, instance__enabled=True)
    instances = [(s.verdict, s.findings) for s in states.only("verdict", "findings")]
    return host_condition(
        enrolled=agent is not None,
        last_heartbeat_at=agent.last_heartbeat_at if agent else None,
        missing_after=HostAgent.MISSING_AFTER,
        instances=instances,
        now=timezone.now(),
    )


RSS_SERIES = "engine_rss_gib"
RSS_WINDOW = timedelta(hours=6)


def instance_on_host(instance: Instance) -> OnHost | None:
    """The instance as its host's agent last saw it, with its RSS trend (guide 2.4.2)."""
    agent = agent_of(instance.host)
    if agent is None or not agent.snapshot:
        return None
    since = timezone.now() - RSS_WINDOW
    points = MetricSample.objects.points(instances=[instance], names=[RSS_SERIES], since=since)
    samples = [
        (ts.timestamp(), gib * 1024 * 1024) for ts, gib in points.get(instance.pk, {}).get(RSS_SERIES, [])
    ]
    return on_host(
        instance=instance,
        snapshot=agent.snapshot,
        port=port_of(instance.base_url),
        taken_at=agent.snapshot_at,
        rss_trend=rss_trend(samples) if samples else None,
    )


def record_rss(agent: HostAgent) -> None:
    """One RSS sample per instance whose engine the snapshot found (for the leak check)."""
    snapshot = agent.snapshot or {}
    engines = {e.get("pid"): e for e in snapshot.get("engines", []) if isinstance(e, dict)}
    by_name = {i.name: i for i in agent.host.instances.all()}
    rows = []
    for row in snapshot.get("instances", []):
        engine = engines.get(row.get("engine_pid")) if isinstance(row, dict) else None
        instance = by_name.get(row.get("name")) if engine else None
        if instance is not None and isinstance(engine.get("rss_kib"), int):
            rows.append(
                MetricSample(
                    instance=instance,
                    name=RSS_SERIES,
                    ts=agent.snapshot_at,
                    value=engine["rss_kib"] / 1024 / 1024,
                )
            )
    MetricSample.objects.bulk_create(rows)


def log_source_for(instance: Instance) -> dict[str, str] | None:
    """Where the instance's engine logs, from its host agent's snapshot: its container, else
    the systemd unit its process runs in; None when the snapshot does not say."""
    seen = instance_on_host(instance)
    engine = seen.engine if seen else None
    if not engine:
        return None
    if engine.get("container_id"):
        name = (seen.container or {}).get("name") or engine["container_id"]
        return {"kind": "container", "target": str(name).lstrip("/")}
    unit = str(engine.get("cgroup", "")).rstrip("/").rsplit("/", 1)[-1]
    if unit.endswith(".service"):
        return {"kind": "journald", "target": unit}
    return None
