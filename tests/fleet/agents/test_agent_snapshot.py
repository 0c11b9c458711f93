"""The host-side checks end to end: the agent (its own process) reads a host tree (/proc,
/sys, the kernel log) and a Docker socket, reports its snapshot, and the instance page shows
what the guide would have you type on the host: the process's real flags against the
inventory, its container's OOMKilled and restarts, the kernel's OOM kill, the host's memory."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from django.urls import reverse

from fleet.agent import dispatch
from fleet.models import HostAgent, MetricSample
from tests.conftest import wait_for
from tests.factories import make_gpu, make_host, make_instance
from tests.fleet.docker_engine_server import DockerEngineServer, oom_killed_container
from tests.fleet.host_trees import CONTAINER_ID, build_host_tree

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]

OOM_LINES = [
    "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
    f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-{CONTAINER_ID}.scope,"
    f"mems_allowed=0-1,oom_memcg=/system.slice/docker-{CONTAINER_ID}.scope,"
    f"task_memcg=/system.slice/docker-{CONTAINER_ID}.scope,task=python3,pid=2716,uid=0",
    "Memory cgroup out of memory: Killed process 2716 (python3) total-vm:98765432kB, "
    "anon-rss:66060288kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:131072kB oom_score_adj:0",
]


@pytest.fixture
def docker_socket():
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="dk"))
    path = folder / "docker.sock"
    with DockerEngineServer(path, containers=[oom_killed_container(id=CONTAINER_ID)]):
        yield path


def test_the_instance_page_shows_what_the_agent_found_on_the_host(
    tmp_path, docker_socket, celery_worker_thread, start_agent, client, cast
):
    host = make_host(name="node-a", address="10.0.0.5")
    gpus = [make_gpu(host, index=i) for i in range(4)]
    instance = make_instance(
        host,
        gpus=gpus,
        name="vllm-a",
        base_url="http://10.0.0.5:8000",
        max_model_len=32768,
        tensor_parallel_size=4,
    )
    agent = HostAgent.objects.create(host=host)
    root = build_host_tree(tmp_path, kmsg_lines=OOM_LINES)
    process = start_agent(agent, nvml="off", root=root, docker_socket=docker_socket)
    assert wait_for(lambda: HostAgent.objects.get(pk=agent.pk).last_heartbeat_at, timeout=60), (
        process.output()
    )

    assert dispatch.request_snapshots(interval_s=60) == ["node-a"]
    assert wait_for(lambda: HostAgent.objects.get(pk=agent.pk).snapshot, timeout=30), process.output()

    client.force_login(cast.viewer)
    page = client.get(reverse("fleet:instance-on-host", args=[instance.pk])).content.decode()
    assert "port 8000: vllm, pid 2716" in page
    assert "inventory says --max-model-len 32768, the process runs 16384" in page
    assert "--tensor-parallel-size" not in page.split("<details>")[0]  # 4 and 4: no drift
    assert "OOMKilled=true" in page and "RestartCount=3" in page
    assert "the container's memory limit (cgroup)" in page and "python3 pid 2716" in page
    assert "no swap" in page
    assert "/models/Qwen2.5-72B-Instruct" in page  # the model directory's disk
    # One RSS sample per snapshot, for the tokenizer-leak check and the chart.
    assert MetricSample.objects.filter(instance=instance, name="engine_rss_gib").count() == 1
