"""Host agents as they run: `manage.py agent` in its own process on the host's queues,
beside the central worker (a thread here), on real Redis, with the simulator's NVML."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from fleet.agent.reports import token_for
from fleet.models import GpuTelemetry, HostAgent
from tests.conftest import require_service, tcp_reachable
from tests.factories import make_gpu, make_host, make_instance
from tests.fleet.probing import free_ports

ROOT = Path(__file__).resolve().parents[3]


def redis_client():
    import redis

    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


@pytest.fixture
def redis_broker():
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("the agents' tests run on Redis (the main run); the embedded run has no agents")
    require_service("Redis", tcp_reachable("127.0.0.1", 6379), "start redis-server on 127.0.0.1:6379")
    client = redis_client()
    for queue in client.scan_iter("host.*"):  # what earlier tests left on hosts' queues
        client.delete(queue)
    yield client
    client.close()


@pytest.fixture
def two_hosts(db):
    """Hosts node-a and node-b, each with one simulated vLLM instance on one GPU, their
    GPU telemetry read by their agents, both agents enrolled."""
    made = {}
    for name, port in zip(("node-a", "node-b"), free_ports(2), strict=True):
        host = make_host(name=name, address="127.0.0.1", gpu_telemetry=GpuTelemetry.NVML)
        gpu = make_gpu(host, index=0)
        instance = make_instance(host, gpus=[gpu], name=f"vllm-{name}", base_url=f"http://127.0.0.1:{port}")
        made[name] = (host, instance, HostAgent.objects.create(host=host))
    return made


class AgentProcess:
    def __init__(self, process: subprocess.Popen, log: Path) -> None:
        self.process, self.log = process, log

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def start_agent(redis_broker, tmp_path):
    """Start `manage.py agent --host NAME` as its own process. Its database URL points
    nowhere: an agent never needs the console's database."""
    started: list[AgentProcess] = []

    def start(
        agent: HostAgent,
        *,
        nvml: str,
        heartbeat_s: float = 1.0,
        root: Path | None = None,
        docker_socket: Path | None = None,
    ) -> AgentProcess:
        env = {
            **os.environ,
            "OPS_AGENT_TOKEN": token_for(agent),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "DATABASE_URL": "postgres://nobody@127.0.0.1:9/no-database-for-agents",
            "DJANGO_SETTINGS_MODULE": "ops_console.settings",
        }
        log = tmp_path / f"agent-{agent.host.name}.log"
        command = [
            sys.executable, "manage.py", "agent", "--host", agent.host.name, "--nvml", nvml,
            "--heartbeat", str(heartbeat_s), "--concurrency", "1", "--loglevel", "INFO",
            *(["--root", str(root)] if root else []),
            *(["--docker-socket", str(docker_socket)] if docker_socket else []),
        ]  # fmt: skip
        with log.open("wb") as out:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        started.append(AgentProcess(process, log))
        return started[-1]

    yield start
    for agent in started:
        agent.stop()
