"""The guide's two cases replayed by the simulator, probed and judged by the console, each
open the right incident: 03:00 long prompts fill the KV cache (KV pressure, not an OOM),
then the container is killed (exit 137: the service is down); 14:00 a batch surge from two
client IPs pushes time to first token past 5 s. Rule durations are set to zero (they are
editable) so that minutes of the guide's time fit in seconds of the test's."""

from __future__ import annotations

import socket
import time
from dataclasses import replace

import pytest

from fleet import probe_service
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.scenarios import load_scenario
from incidents.alerting import evaluate
from incidents.models import AlertRule, Incident
from tests.factories import make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replay(name: str, *, time_scale: float, seconds: float, until=lambda: False):
    """Run a shipped scenario on a free port with its instance in the inventory, probing and
    evaluating the rules about once a second."""
    AlertRule.objects.update(for_seconds=0)
    scenario = load_scenario(name)
    (spec,) = scenario.instances
    port = free_port()
    scenario = replace(scenario, time_scale=time_scale, instances=(replace(spec, port=port),))
    host = make_host(name="gpu-server", gpu_telemetry="simulated", numa_nodes=1)
    instance = make_instance(
        host, name=spec.name, base_url=f"http://127.0.0.1:{port}", served_model_name=spec.served_model_name,
        engine_version=spec.version, max_model_len=spec.max_model_len, max_num_seqs=spec.max_num_seqs,
        gpus=[make_gpu(host, model="a100-80gb")],
    )  # fmt: skip
    with SimulatorThread(scenario.instances, scenario=scenario):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not until():
            for kind in ("health", "metrics"):
                probe_service.run_cycle(kind=kind)
            evaluate()
            time.sleep(0.5)
    return instance


def test_the_0300_case_opens_kv_pressure_and_then_service_down(quick_settings):
    def both_open():
        return {"oom.kv_pressure", "process.not_started"} <= set(
            Incident.objects.values_list("category", flat=True)
        )

    instance = replay("guide-0300-long-prompt-kv-exhaustion.yaml", time_scale=12, seconds=70, until=both_open)
    categories = dict(Incident.objects.values_list("category", "started_at"))
    assert "oom.kv_pressure" in categories and "process.not_started" in categories
    assert categories["oom.kv_pressure"] < categories["process.not_started"]  # KV first, the kill after
    assert not Incident.objects.filter(category__startswith="oom.gpu").exists()  # not called a GPU OOM
    assert set(Incident.objects.get(category="oom.kv_pressure").instances.all()) == {instance}


def test_the_1400_case_opens_an_engine_queue_incident(quick_settings):
    # Case 3.5: a cron surge from two client IPs fills max_num_seqs; requests queue and the
    # clients' 10 s timeouts abort some. The cause is the queue; the aborts are its consequence.
    def queue_open():
        return Incident.objects.filter(category="rate_limit.queue").exists()

    replay("guide-1400-batch-surge-two-ips.yaml", time_scale=60, seconds=60, until=queue_open)
    incident = Incident.objects.get(category="rate_limit.queue")
    assert incident.evidence["instances"]["vllm-prod-01"]["metrics"]["num_requests_waiting"] > 50
    assert incident.title == "More than 50 requests waiting on vllm-prod-01"
