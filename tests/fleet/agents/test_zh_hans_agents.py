"""The agent's panels in Simplified Chinese: the host page's Agent card (with its set-up),
the instance page's "On the host" card over a real snapshot of a fixture host, and a judged
pre-deploy checklist. Commands, paths and units stay as they are; no other English is left."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from diagnostics.models import PredeployRun
from diagnostics.predeploy_service import judge_answer
from fleet.agent import checks
from fleet.agent.gather import predeploy_facts
from fleet.agent.worker import AgentConfig
from fleet.models import AgentRequest, HostAgent
from fleet.nvml.base import NvmlReading
from tests.factories import make_gpu, make_host, make_instance
from tests.fleet.docker_engine_server import DockerEngineServer, oom_killed_container
from tests.fleet.host_trees import CONTAINER_ID, build_host_tree
from tests.probes.gpus import gpu
from tests.zh import english_left

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
OOM = [
    f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-{CONTAINER_ID}.scope,mems_allowed=0-1,"
    f"oom_memcg=/system.slice/docker-{CONTAINER_ID}.scope,task_memcg=/system.slice/docker-{CONTAINER_ID}.scope,"
    "task=python3,pid=2716,uid=0",
    "Memory cgroup out of memory: Killed process 2716 (python3) total-vm:98765432kB, anon-rss:66060288kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:131072kB oom_score_adj:0",
    "NVRM: Xid (PCI:0000:18:00): 79, pid=2716, name=python3, GPU has fallen off the bus.",
]


@pytest.fixture
def fleet(tmp_path):
    host = make_host(name="node-a", address="10.0.0.5")
    gpus = [make_gpu(host, index=i) for i in range(4)]
    instance = make_instance(
        host,
        gpus=gpus,
        name="vllm-a",
        base_url="http://10.0.0.5:8000",
        max_model_len=32768,
        engine_version="0.10.2",
        tensor_parallel_size=4,
    )
    agent = HostAgent.objects.create(
        host=host,
        last_heartbeat_at=timezone.now(),
        hostname="gpu-node-a",
        pid=4242,
        agent_version="1",
        capabilities={"nvml": True, "docker_socket": True},
        gpu_reading_at=timezone.now(),
    )
    return host, instance, agent, build_host_tree(tmp_path, kmsg_lines=OOM)


def zh_part(client, url: str) -> str:
    response = client.get(url, **ZH)
    assert response.status_code == 200
    html = response.content.decode()
    left = english_left(html, names={"node-a", "vllm-a", "gpu-node-a", "vllm-server"})
    assert not left, f"{url}: English left:\n" + "\n".join(left[:30])
    return html


def test_the_agent_card_reads_in_chinese_with_its_set_up(client, cast, fleet):
    host, *_ = fleet
    client.force_login(cast.sre)
    html = zh_part(client, reverse("fleet:host-agent", args=[host.pk]))
    assert "systemctl enable --now ops-agent.service" in html  # the commands stay as they are


def test_the_on_host_card_reads_in_chinese(client, cast, fleet):
    host, instance, agent, root = fleet
    socket_path = Path(tempfile.mkdtemp(dir="/tmp", prefix="dk")) / "docker.sock"
    config = AgentConfig(
        host="node-a", token="t", broker_url="memory://", root=root, docker_socket=str(socket_path)
    )
    with DockerEngineServer(socket_path, containers=[oom_killed_container(id=CONTAINER_ID)]):
        agent.snapshot = checks.snapshot(
            config=config, expect={"instances": [{"name": "vllm-a", "port": 8000}]}
        )
    agent.snapshot_at = timezone.now()
    agent.save()
    client.force_login(cast.viewer)
    html = zh_part(client, reverse("fleet:instance-on-host", args=[instance.pk]))
    assert "OOMKilled=true" in html and "--max-model-len" in html


def test_a_judged_checklist_reads_in_chinese(client, cast, fleet):
    host, instance, _, root = fleet
    reading = NvmlReading(
        driver_version="570.133.20", cuda_version="12.8", gpus=tuple(gpu(i) for i in range(4))
    )
    config = AgentConfig(host="node-a", token="t", broker_url="memory://", root=root)
    facts = predeploy_facts(
        config=config, reading=reading, model_dir="/models/Qwen2.5-72B-Instruct", port=8000
    )
    request = AgentRequest.objects.create(
        host=host,
        task="agent.predeploy_facts",
        purpose="predeploy:1",
        expires_at=timezone.now(),
        status=AgentRequest.Status.ANSWERED,
        answer={"facts": facts.to_dict()},
    )
    run = PredeployRun.objects.create(
        host=host,
        instance=instance,
        request=request,
        requirements={
            "engine": "vllm",
            "engine_version": "0.10.2",
            "weights_bytes": 140 * 2**30,
            "gpu_indexes": [0, 1, 2, 3],
            "tensor_parallel_size": 4,
            "gpu_memory_utilization": 0.9,
            "port": 8000,
            "model_dir": "/models/Qwen2.5-72B-Instruct",
        },
    )
    request.purpose = f"predeploy:{run.pk}"
    request.save()
    judge_answer(request)
    run.refresh_from_db()
    assert {item["status"] for item in run.items} >= {"pass", "fail", "warn"}
    client.force_login(cast.viewer)
    zh_part(client, reverse("diagnostics:predeploy-run", args=[run.pk]))
    zh_part(client, reverse("diagnostics:host-predeploy", args=[host.pk]))
