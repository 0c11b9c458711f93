"""Host agents on their hosts' queues: a central worker and an agent per host, real Celery
on real Redis. Work for a GPU host runs on that host's agent and nowhere else; the agent's
readings come back signed and feed the GPU probe; a silent agent shows as missing, not as
its host down."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from fleet import probe_service
from fleet.agent import dispatch
from fleet.agent.routing import AGENT_TASKS, host_queue
from fleet.host_condition import AGENT_MISSING, AGENT_UP, host_condition
from fleet.models import HostAgent, InstanceState
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]


def fresh(agent: HostAgent) -> HostAgent:
    return HostAgent.objects.get(pk=agent.pk)


def sim_nvml(instance) -> str:
    return f"simulated={instance.base_url}/_sim/nvml"


@pytest.fixture
def fleet_with_agents(two_hosts, simulator, celery_worker_thread, start_agent):
    simulator()
    agents = {
        name: start_agent(agent, nvml=sim_nvml(instance)) for name, (_, instance, agent) in two_hosts.items()
    }
    for name, (_, _, agent) in two_hosts.items():
        assert wait_for(lambda a=agent: fresh(a).last_heartbeat_at is not None, timeout=60), agents[
            name
        ].output()
    return two_hosts, agents


def test_each_agent_heartbeats_with_what_it_can_do(fleet_with_agents):
    hosts, _ = fleet_with_agents
    agent = fresh(hosts["node-a"][2])
    assert agent.agent_version and agent.pid and agent.hostname
    assert agent.capabilities["nvml"] is True
    first = agent.last_heartbeat_at
    assert wait_for(lambda: fresh(agent).last_heartbeat_at > first, timeout=15)  # it keeps beating


def test_an_agent_knows_only_its_fixed_checks(fleet_with_agents):
    _, agents = fleet_with_agents
    assert wait_for(lambda: "ready." in agents["node-a"].output(), timeout=30)
    listed = agents["node-a"].output().split("[tasks]", 1)[1].split("\n\n", 1)[0]
    assert sorted(line.strip(" .") for line in listed.strip().splitlines()) == sorted(AGENT_TASKS)
    assert len(AGENT_TASKS) == 5  # GPUs, snapshot, pre-deploy facts, log pull, model config: nothing else


def test_the_gpu_probe_judges_what_each_hosts_agent_read_on_that_host(fleet_with_agents, redis_broker):
    hosts, _ = fleet_with_agents
    asked = dispatch.request_gpu_readings(interval_s=30)
    assert sorted(asked) == ["node-a", "node-b"]
    for _, _, agent in hosts.values():
        assert wait_for(lambda a=agent: fresh(a).gpu_reading is not None, timeout=30)
    probe_service.sweep(instances=probe_service.instances_for("gpu"), kind="gpu")
    for name, (_, instance, _) in hosts.items():
        gpu = InstanceState.objects.get(instance=instance).kinds["gpu"]["result"]["gpus"]
        assert gpu["outcome"] == "ok", (name, gpu)
        assert [g["index"] for g in gpu["reading"]["gpus"]] == [0]


def test_a_task_for_host_a_never_runs_on_host_bs_agent(fleet_with_agents, redis_broker):
    hosts, agents = fleet_with_agents
    agents["node-a"].stop()
    before = {name: fresh(agent).gpu_reading_at for name, (_, _, agent) in hosts.items()}
    dispatch.send("agent.read_gpus", host="node-a", expires_s=60)
    dispatch.send("agent.read_gpus", host="node-b", expires_s=60)
    assert wait_for(lambda: fresh(hosts["node-b"][2]).gpu_reading_at != before["node-b"], timeout=30)
    assert fresh(hosts["node-a"][2]).gpu_reading_at == before["node-a"]  # nobody read node-a's GPUs
    assert redis_broker.llen(host_queue("node-a")) == 1  # its task waits for its own agent


def test_an_agent_refuses_a_task_addressed_to_another_host(fleet_with_agents, redis_broker):
    hosts, agents = fleet_with_agents
    from ops_console.celery import app

    before = fresh(hosts["node-a"][2]).gpu_reading_at
    # Put on node-b's queue by hand (the router would never): node-b's agent must refuse it.
    app.send_task("agent.read_gpus", kwargs={"host": "node-a"}, queue=host_queue("node-b"), expires=60)
    assert wait_for(lambda: "refused a task for host 'node-a'" in agents["node-b"].output(), timeout=30)
    assert fresh(hosts["node-a"][2]).gpu_reading_at == before


def test_an_expired_check_is_not_replayed_when_the_agent_comes_back(
    two_hosts, simulator, celery_worker_thread, start_agent, redis_broker
):
    simulator()
    _, instance, agent = two_hosts["node-a"]
    dispatch.send("agent.read_gpus", host="node-a", expires_s=1)  # sent while no agent runs
    assert redis_broker.llen(host_queue("node-a")) == 1
    time.sleep(1.5)
    process = start_agent(agent, nvml=sim_nvml(instance))
    assert wait_for(lambda: fresh(agent).last_heartbeat_at is not None, timeout=60), process.output()
    assert wait_for(lambda: redis_broker.llen(host_queue("node-a")) == 0, timeout=20)
    assert wait_for(lambda: "Discarding revoked task: agent.read_gpus" in process.output(), timeout=20)
    assert fresh(agent).gpu_reading is None  # the old check was dropped, not run


def test_a_silent_agent_is_missing_while_its_host_still_answers(fleet_with_agents):
    hosts, agents = fleet_with_agents
    host, instance, agent = hosts["node-a"]
    probe_service.sweep(instances=probe_service.instances_for("health"), kind="health")
    state = InstanceState.objects.get(instance=instance)

    def condition(at):
        agent_row = fresh(agent)
        return host_condition(
            enrolled=True,
            last_heartbeat_at=agent_row.last_heartbeat_at,
            missing_after=HostAgent.MISSING_AFTER,
            instances=[(state.verdict, state.findings)],
            now=at,
        )

    assert condition(timezone.now()).condition == AGENT_UP
    agents["node-a"].stop()
    later = timezone.now() + HostAgent.MISSING_AFTER + timedelta(seconds=5)
    seen = condition(later)
    assert seen.condition == AGENT_MISSING and seen.host_up is True
    assert "agent missing" in str(seen.message)
    # And the GPU probe says the agent is missing rather than reading this worker's GPUs.
    HostAgent.objects.filter(pk=agent.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    probe_service.sweep(instances=probe_service.instances_for("gpu"), kind="gpu")
    gpu = InstanceState.objects.get(instance=instance).kinds["gpu"]["result"]["gpus"]
    assert gpu["outcome"] == "error" and "agent missing" in gpu["error"]
