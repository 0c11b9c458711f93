"""The GPU probe of a host whose NVML its agent reads: it judges the agent's last reading
while that is fresh for the GPU schedule's interval, and says why when it cannot."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet import probe_service
from fleet.models import GpuTelemetry, HostAgent, InstanceState
from fleet.nvml.base import NvmlReading
from tests.factories import make_gpu, make_host, make_instance
from tests.probes.gpus import gpu

pytestmark = pytest.mark.django_db

READING = NvmlReading(driver_version="570.133.20", cuda_version="12.8", gpus=(gpu(0),)).to_dict()


@pytest.fixture
def instance():
    host = make_host(name="node-a", gpu_telemetry=GpuTelemetry.NVML)
    return make_instance(host, gpus=[make_gpu(host, index=0)], name="vllm-a")


def gpu_result(instance, **sweep) -> dict:
    probe_service.sweep(instances=probe_service.instances_for("gpu"), kind="gpu", **sweep)
    return InstanceState.objects.get(instance=instance).kinds["gpu"]["result"]["gpus"]


def agent_with(instance, *, reading_age_s: float, **fields) -> HostAgent:
    now = timezone.now()
    values = {
        "last_heartbeat_at": now,
        "gpu_reading": READING,
        "gpu_reading_at": now - timedelta(seconds=reading_age_s),
    }
    return HostAgent.objects.create(host=instance.host, **(values | fields))


def test_a_fresh_reading_is_judged(instance):
    agent_with(instance, reading_age_s=5)
    assert gpu_result(instance)["outcome"] == "ok"


def test_how_long_a_reading_stays_fresh_follows_the_gpu_schedule(instance):
    agent_with(instance, reading_age_s=120)
    assert "no GPU reading lately" in gpu_result(instance)["error"]  # 3 x 30 s by default
    assert gpu_result(instance, intervals_s={"gpu": 60})["outcome"] == "ok"  # 3 x 60 s


def test_without_an_agent_the_probe_says_how_to_get_gpu_state(instance):
    assert "has no agent: enrol one" in gpu_result(instance)["error"]


def test_the_agents_own_nvml_error_is_passed_on(instance):
    agent_with(instance, reading_age_s=1, gpu_reading=None, gpu_error="NVML Shared Library Not Found")
    assert "could not read NVML: NVML Shared Library Not Found" in gpu_result(instance)["error"]
