"""Checks someone waits for, end to end through a real agent process: the pre-deploy
checklist run from a host's page, and the engine's log pulled and triaged when an incident
opens on its instance."""

from __future__ import annotations

import tempfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from diagnostics.models import PredeployRun
from fleet.agent import dispatch
from fleet.models import AgentRequest, HostAgent
from incidents import lifecycle
from incidents.models import TimelineEntry
from tests.conftest import wait_for
from tests.factories import make_gpu, make_host, make_instance
from tests.fleet.docker_engine_server import STDERR, DockerEngineServer, vllm_container
from tests.fleet.host_trees import CONTAINER_ID, Socket, build_host_tree
from tests.fleet.probing import free_ports

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]

CUDA_OOM = [
    (STDERR, "INFO 12-04 03:00:01 [engine.py:310] Added request chatcmpl-7f1."),
    (
        STDERR,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB. GPU 0 has a total "
        "capacity of 79.11 GiB of which 140.75 MiB is free. Process 3270336 has 78.96 GiB memory in use.",
    ),
    (STDERR, "ERROR 12-04 03:00:02 [engine.py:160] EngineCore failed to start."),
]


@pytest.fixture
def docker_socket():
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="dk"))
    path = folder / "docker.sock"
    with DockerEngineServer(path, containers=[vllm_container(id=CONTAINER_ID, log=CUDA_OOM)]):
        yield path


@pytest.fixture
def host_with_agent(tmp_path, settings, docker_socket, simulator, celery_worker_thread, start_agent):
    settings.MEDIA_ROOT = tmp_path / "media"  # a pulled log is kept as a triage run's file
    (port,) = free_ports(1)
    host = make_host(name="node-a", address="127.0.0.1")
    gpus = [make_gpu(host, index=0)]
    instance = make_instance(
        host, gpus=gpus, name="vllm-a", base_url=f"http://127.0.0.1:{port}", engine_version="0.10.2"
    )  # built on CUDA 12.8: the simulated driver 570.133 is new enough
    simulator()  # the instance's NVML, read by the agent
    agent = HostAgent.objects.create(host=host)
    root = build_host_tree(tmp_path, listening=[Socket(port, 2716)])  # the tree's vLLM on the instance's port
    process = start_agent(
        agent, nvml=f"simulated={instance.base_url}/_sim/nvml", root=root, docker_socket=docker_socket
    )
    assert wait_for(lambda: HostAgent.objects.get(pk=agent.pk).last_heartbeat_at, timeout=60), (
        process.output()
    )
    return host, instance, agent, process


def test_the_pre_deploy_checklist_judges_what_the_agent_found_on_the_host(host_with_agent, client, cast):
    host, instance, _, process = host_with_agent
    client.force_login(cast.engineer)
    panel = reverse("diagnostics:host-predeploy", args=[host.pk])
    form = client.get(panel).content.decode()
    assert "Run the checklist" in form and "/models/" in form  # the model directory is filled in
    client.post(panel, {"instance": instance.pk, "model_dir": "/models/Qwen2.5-72B-Instruct"})
    run = PredeployRun.objects.get(host=host)
    assert run.request.task == "agent.predeploy_facts" and run.request.status == "sent"
    assert wait_for(lambda: PredeployRun.objects.get(pk=run.pk).judged_at, timeout=60), process.output()
    run.refresh_from_db()
    items = {item["key"]: item["status"] for item in run.items}
    assert items["driver"] == "pass" and items["gpus"] == "pass"
    assert items["swap"] == "warn"  # the tree's host has no swap
    assert items["port"] == "fail"  # the tree's vLLM holds the instance's port already
    page = client.get(reverse("diagnostics:predeploy-run", args=[run.pk])).content.decode()
    assert 'data-key="shm"' in page and "item-warn" in page


def test_the_checklist_refuses_a_relative_model_directory(host_with_agent, client, cast):
    host, instance, _, _ = host_with_agent
    client.force_login(cast.engineer)
    page = client.post(
        reverse("diagnostics:host-predeploy", args=[host.pk]),
        {"instance": instance.pk, "model_dir": "models/x"},
    ).content.decode()
    assert "Give an absolute path" in page and not PredeployRun.objects.exists()


def test_an_incident_on_the_instance_brings_its_engines_log_triaged_to_the_timeline(host_with_agent):
    host, instance, agent, process = host_with_agent
    dispatch.request_snapshots(interval_s=60)  # the agent finds the engine's container
    assert wait_for(lambda: HostAgent.objects.get(pk=agent.pk).snapshot, timeout=30), process.output()
    incident, created = lifecycle.open_or_join(
        key=lifecycle.dedup_key(instance=instance, category="oom.gpu"),
        title="GPU OOM on vllm-a",
        category="oom.gpu",
        severity="critical",
        source="alert",
        at=timezone.now(),
        text="fired",
        instances=[instance],
    )
    assert created
    assert wait_for(
        lambda: TimelineEntry.objects.filter(incident=incident, kind=TimelineEntry.Kind.TRIAGE).exists(),
        timeout=60,
    ), process.output()
    entry = TimelineEntry.objects.get(incident=incident, kind=TimelineEntry.Kind.TRIAGE)
    assert entry.data["pulled_from"] == {"kind": "container", "target": "vllm-server"}
    assert entry.data["category"].startswith("oom")
    assert "pulled from container vllm-server on node-a" in entry.text
    assert AgentRequest.objects.get(purpose=f"incident:{incident.pk}:{instance.pk}").status == "answered"


def test_the_checklist_from_the_command_line_prints_each_item_and_fails_a_host_not_ready(host_with_agent):
    host, instance, _, _ = host_with_agent
    out = StringIO()
    with pytest.raises(CommandError, match="node-a: not ready"):  # the tree's vLLM holds the port
        call_command("predeploy", "node-a", "--instance", instance.name, "--wait", "60", stdout=out)
    printed = out.getvalue()
    assert "[ok  ]" in printed and "[FAIL]" in printed and printed.rstrip().endswith("node-a: not ready")


def test_the_checklist_command_names_what_is_wrong_with_its_input(db):
    make_host(name="node-z")
    with pytest.raises(CommandError, match="no GPU host named 'nowhere'"):
        call_command("predeploy", "nowhere", "--instance", "x")
    with pytest.raises(CommandError, match=r"has no instance 'x' \(known: none\)"):
        call_command("predeploy", "node-z", "--instance", "x")
