"""The scheduled capacity check: each vLLM instance's flags against its GPUs and against the
load the probes saw; findings kept while found, cleared when not, history kept."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from diagnostics import capacity_service
from diagnostics.models import CapacityFinding, InstanceSizing
from fleet import probe_service
from fleet.models import MetricSample
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.spec import LoadProfile, specs_from_inventory
from ops_console.schedules import SCHEDULES
from tests.factories import make_gpu, make_host, make_instance
from tests.fleet.probing import simulated_instances

pytestmark = pytest.mark.django_db


def a100_instance(**flags):
    host = make_host()
    flags.setdefault("served_model_name", "Qwen/Qwen3-32B")
    flags.setdefault("max_model_len", 32768)
    flags.setdefault("max_num_seqs", 256)
    return make_instance(host, gpus=[make_gpu(host, model="a100-80gb")], **flags)


def saw(instance, **values):
    now = timezone.now()
    MetricSample.objects.bulk_create(
        MetricSample(instance=instance, name=name, ts=now - timedelta(minutes=1), value=value)
        for name, value in values.items()
    )


def open_codes(instance):
    return set(CapacityFinding.objects.filter(instance=instance).active().values_list("code", flat=True))


def test_the_capacity_check_is_scheduled_every_five_minutes():
    (entry,) = [s for s in SCHEDULES if s.task == "diagnostics.capacity_check"]
    assert entry.every_seconds == 300


def test_the_guides_0300_case_long_prompts_with_kv_pressure_is_critical():
    # max_model_len 32768 and max_num_seqs 256; the probes saw 30K-token prompts, a full
    # KV cache and a queue (corrections #3: waiting and preemptions, not an OOM).
    instance = a100_instance()
    saw(
        instance,
        prompt_length_p99=30500,
        prompt_length_p95=29000,
        kv_cache_usage=0.99,
        num_requests_waiting=14,
    )
    capacity_service.check_fleet()
    finding = CapacityFinding.objects.get(instance=instance, code="long_prompts_exhaust_kv")
    assert finding.severity == "critical"
    assert finding.numbers["prompt_tokens_p99"] == 30500 and finding.numbers["requests_that_fit"] < 3
    assert "--max-model-len" in finding.fix and "fp8" in finding.fix
    sizing = InstanceSizing.objects.get(instance=instance)
    assert sizing.result["kv_cache_tokens"] > 0 and sizing.model_key == "qwen3-32b"


def test_long_prompts_without_pressure_are_a_warning_and_short_ones_nothing():
    quiet = a100_instance()
    saw(quiet, prompt_length_p99=30500, kv_cache_usage=0.4, num_requests_waiting=0)
    short = a100_instance(served_model_name="Qwen/Qwen3-8B", max_num_seqs=64)
    saw(short, prompt_length_p99=1800, kv_cache_usage=0.3)
    capacity_service.check_fleet()
    assert CapacityFinding.objects.get(instance=quiet, code="long_prompts_exhaust_kv").severity == "warning"
    assert "long_prompts_exhaust_kv" not in open_codes(short)


def test_flags_that_cannot_start_are_found_then_cleared_when_fixed_and_the_history_kept():
    instance = a100_instance(served_model_name="meta-llama/Llama-3.3-70B-Instruct", max_model_len=8192)
    capacity_service.check_fleet()
    assert open_codes(instance) == {"will_not_start"}
    first = CapacityFinding.objects.get(instance=instance, code="will_not_start")
    assert first.severity == "critical" and "CUDA out of memory" in first.detail

    capacity_service.check_fleet()  # found again: the same row, seen later
    assert CapacityFinding.objects.filter(instance=instance).count() == 1

    instance.served_model_name = "Qwen/Qwen3-8B"
    instance.save()
    capacity_service.check_fleet()
    first.refresh_from_db()
    assert first.cleared_at is not None and "will_not_start" not in open_codes(instance)


def test_an_instance_that_cannot_be_sized_says_why_and_gets_no_findings():
    instance = a100_instance(served_model_name="acme/unknown")
    counts = capacity_service.check_fleet()
    assert counts["not_sized"] == 1
    assert "not in the sizing catalogue" in InstanceSizing.objects.get(instance=instance).problem
    assert not CapacityFinding.objects.filter(instance=instance).exists()


def test_findings_show_on_the_instance_page_and_the_fleet_overview(client, cast):
    instance = a100_instance(name="gpu-server-03")
    saw(instance, prompt_length_p99=30500, kv_cache_usage=0.99, num_requests_waiting=14)
    capacity_service.check_fleet()
    client.force_login(cast.viewer)
    page = client.get(instance.get_absolute_url()).content.decode()
    assert "Prompts of 30,500 tokens" in page and "Size this instance" not in page  # a viewer's page
    client.force_login(cast.engineer)
    assert "Size this instance" in client.get(instance.get_absolute_url()).content.decode()
    client.force_login(cast.viewer)
    overview = client.get("/fleet/").content.decode()
    assert (
        "Capacity findings" in overview
        and "gpu-server-03" in overview
        and "Prompts of 30,500 tokens" in overview
    )


def test_real_long_prompts_from_the_simulator_reach_the_check_through_the_probes(quick_settings):
    # Over real sockets: the simulator serves 29K-token prompts, the metrics probe reads the
    # prompt-length histogram and KV usage, the check compares them with the sizing.
    (instance,) = simulated_instances(
        1,
        served_model_name="Qwen/Qwen3-32B",
        max_model_len=32768,
        max_num_seqs=256,
        gpu_memory_utilization=0.95,
    )
    load = LoadProfile(requests_per_s=3, mean_prompt_tokens=29000, mean_output_tokens=8, spread=0.03)
    with SimulatorThread(specs_from_inventory(load=load)):
        probe_service.run_cycle(kind="metrics")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(2)
            probe_service.run_cycle(kind="metrics")
            if MetricSample.objects.filter(instance=instance, name="prompt_length_p99").exists():
                break
    p99 = MetricSample.objects.filter(instance=instance, name="prompt_length_p99").latest("ts").value
    # vLLM's prompt buckets stop below max_model_len (..., 10000, 20000, +Inf); like PromQL,
    # a quantile in the +Inf bucket is the highest finite bound: "at least 20,000".
    assert p99 == 20000
    capacity_service.check_fleet()
    assert "long_prompts_exhaust_kv" in open_codes(instance)
