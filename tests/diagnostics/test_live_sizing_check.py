"""The live sizing check: the calculator's prediction for an instance's inventory flags against
the KV cache its running engine reports (vllm:cache_config_info), each explanation of a
drift, no finding within the tolerance; and, over real sockets, a simulated vLLM probed by
the metrics probe and checked by the scheduled capacity check."""

from dataclasses import replace

import pytest
from django.utils import timezone

from diagnostics import capacity_service
from diagnostics.models import CapacityFinding, InstanceSizing
from diagnostics.sizing import catalog, live_check
from diagnostics.sizing.calculator import SizingSpec, compute, size
from diagnostics.sizing.live_check import Cause, Reported, compare
from fleet import gpu_catalog, probe_service
from fleet.models import InstanceState, MetricSample
from fleet.probes import metric_names
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.spec import LoadProfile, specs_from_inventory
from tests.fleet.probing import simulated_instances
from tests.sizing_eval import scratch_eval

GiB = 1 << 30
H100 = gpu_catalog.get("h100-80gb")
CATALOGUE = {entry.key: entry for entry in catalog.shipped()}


def sized(key="llama-3.1-8b-instruct", **flags):
    flags.setdefault("gpu", H100)
    flags.setdefault("gpu_memory_utilization", 0.9)
    flags.setdefault("max_model_len", 32768)
    flags.setdefault("vllm_version", "0.11")
    return size(SizingSpec(arch=CATALOGUE[key].architecture(), **flags))


def report(blocks, *, block_size=16, utilization=0.9):
    return Reported(num_gpu_blocks=blocks, block_size=block_size, gpu_memory_utilization=utilization)


# The pure comparison.


def test_the_engine_reporting_the_predicted_cache_is_no_finding():
    sizing = sized()
    live = compare(sizing, report(sizing.capacity.num_blocks), version="0.11.2")
    assert live.causes == () and live.issue() is None and not live.drifted
    assert live.difference_blocks == 0 and live.difference_tokens == 0 and live.difference_pct == 0
    assert live.to_dict()["reported"] == live.to_dict()["predicted"]


@pytest.mark.parametrize("share", [0.88, 1.12])
def test_a_difference_within_the_calculators_tolerance_is_no_finding(share):
    sizing = sized()
    blocks = int(sizing.capacity.num_blocks * share)
    live = compare(sizing, report(blocks))
    assert abs(live.residual_blocks) <= live.tolerance_blocks and live.issue() is None


def test_the_tolerance_is_15_percent_of_the_cache_or_2_gib_per_gpu_whichever_is_larger():
    big = sized()  # ~54 GiB of KV cache: 15 % of it
    assert big.capacity.num_blocks > 20_000
    assert live_check.tolerance_blocks(big, 20_000) == 3_000
    # Qwen3-32B on one H100 leaves a few GiB: 2 GiB of blocks is the floor.
    small = sized("qwen3-32b", max_num_seqs=256)
    block_bytes = small.kv.page_bytes * small.kv.group_size
    assert live_check.tolerance_blocks(small, 100) == 2 * GiB // block_bytes
    live = compare(small, report(max(small.capacity.num_blocks - 2 * GiB // block_bytes + 1, 1)))
    assert live.issue() is None


def test_every_real_start_up_of_the_scratch_check_is_within_the_tolerance():
    # The tolerance is the calculator's measured accuracy (docs/live-sizing-check.md): sized
    # from their flags alone, the real start-ups must not read as a drift.
    for case in scratch_eval.load():
        predicted = scratch_eval.predict(case).available_gib * GiB
        logged = case["logged"]["available_kv_cache_gib"] * GiB
        allowed = max(live_check.TOLERANCE_SHARE * predicted, live_check.TOLERANCE_BYTES)
        assert abs(predicted - logged) <= allowed, case.get("source")


def test_another_gpu_memory_utilization_than_the_inventorys_is_named_with_its_prediction():
    sizing = sized()
    at_080 = compute(replace(sizing.spec, gpu_memory_utilization=0.8)).capacity.num_blocks
    live = compare(sizing, report(at_080, utilization=0.8), version="0.11.2")
    assert live.causes == (Cause.UTILIZATION,)
    assert live.expected_blocks == at_080 and live.residual_blocks == 0
    issue = live.issue()
    assert issue.code == "live_sizing_drift" and issue.severity == "warning"
    assert f"reports {at_080:,} KV cache blocks" in issue.title
    assert "another gpu_memory_utilization than the inventory says: 0.8, not 0.9" in issue.detail
    assert f"predicts {at_080:,} blocks" in issue.detail
    assert "--gpu-memory-utilization 0.9" in issue.fix
    assert issue.numbers["reported"]["gpu_memory_utilization"] == 0.8
    assert issue.numbers["difference"]["blocks"] == at_080 - sizing.capacity.num_blocks


def test_a_utilization_the_same_up_to_its_label_is_no_finding():
    sizing = sized()
    live = compare(sizing, report(sizing.capacity.num_blocks, utilization=0.90000001))
    assert live.issue() is None


def test_another_block_size_is_named_and_compared_in_tokens():
    sizing = sized()
    blocks = sizing.capacity.num_blocks // 2  # the same memory in blocks of 32 tokens
    live = compare(sizing, report(blocks, block_size=32))
    assert live.causes == (Cause.BLOCK_SIZE,)
    assert abs(live.difference_tokens) <= 32 and abs(live.residual_blocks) <= 1
    issue = live.issue()
    assert issue.severity == "info"
    assert "blocks hold 32 tokens, the sizing's 16" in issue.detail
    assert "--block-size 16" in issue.fix


def test_fewer_blocks_than_predicted_beyond_the_tolerance_name_another_process_or_the_version():
    sizing = sized()
    live = compare(sizing, report(int(sizing.capacity.num_blocks * 0.7)), version="0.11.2")
    assert live.causes == (Cause.FEWER_BLOCKS,)
    issue = live.issue()
    assert issue.severity == "warning"
    assert "another process holds GPU memory" in issue.detail
    assert "the inventory says vLLM 0.11.2" in issue.detail
    assert "nvidia-smi" in issue.fix
    unnamed = compare(sizing, report(int(sizing.capacity.num_blocks * 0.7))).issue()
    assert "the inventory names no vLLM version" in unnamed.detail


def test_more_blocks_than_predicted_say_the_inventorys_flags_are_not_the_ones_running():
    sizing = sized()
    fp8 = compute(replace(sizing.spec, kv_cache_dtype="fp8")).capacity.num_blocks
    live = compare(sizing, report(fp8))
    assert live.causes == (Cause.MORE_BLOCKS,) and live.fp8_blocks == fp8
    issue = live.issue()
    assert issue.severity == "info"
    assert "the inventory's flags are not the ones running" in issue.detail
    assert "With an fp8 KV cache the calculator predicts" in issue.detail
    # A smaller max_model_len than the inventory's does not look like an fp8 cache.
    other = compare(sizing, report(int(sizing.capacity.num_blocks * 1.4))).issue()
    assert "not the ones running" in other.detail and "With an fp8" not in other.detail


def test_an_engine_running_where_the_sizing_says_it_cannot_start_has_more_blocks():
    sizing = sized("gpt-oss-120b", vllm_version="0.10", max_model_len=None)
    assert sizing.error is not None and sizing.capacity.num_blocks == 0
    live = compare(sizing, report(30_000))
    assert live.causes == (Cause.MORE_BLOCKS,) and live.difference_pct is None
    assert "(—)" in live.issue().title and live.to_dict()["difference"]["pct"] is None


def test_causes_combine_and_the_residual_is_taken_after_the_engines_own_utilization():
    sizing = sized()
    at_080 = compute(replace(sizing.spec, gpu_memory_utilization=0.8)).capacity.num_blocks
    live = compare(sizing, report(int(at_080 * 0.6), utilization=0.8), version="0.11.2")
    assert live.causes == (Cause.UTILIZATION, Cause.FEWER_BLOCKS)
    issue = live.issue()
    assert "0.8, not 0.9" in issue.detail and "fewer blocks than predicted" in issue.detail
    assert len(issue.fix_messages) == 2 and issue.severity == "warning"


def test_the_engines_concurrency_is_its_blocks_over_one_max_length_request():
    sizing = sized()
    live = compare(sizing, report(20_000))
    assert live.reported.max_concurrency == pytest.approx(20_000 * 16 / 32768)
    assert live.predicted.max_concurrency == pytest.approx(sizing.capacity.max_concurrency)
    assert live.reported.tokens == 20_000 * 16  # 0.11 logs blocks // groups x block size


def test_the_reported_names_are_the_probes_canonical_names_for_cache_config_info():
    assert set(live_check.REPORTED_NAMES) <= set(metric_names.CACHE_CONFIG_FIELDS.values())


def test_reported_values_are_read_from_canonical_values_and_refused_when_absent():
    assert Reported.from_values({}) is None
    assert Reported.from_values({"num_gpu_blocks": 0}) is None
    assert Reported.from_values({"block_size": 16}) is None
    read = Reported.from_values(
        {"num_gpu_blocks": "1234", "block_size": 16.0, "gpu_memory_utilization": "0.85"}
    )
    assert read == Reported(num_gpu_blocks=1234, block_size=16, gpu_memory_utilization=0.85)
    assert (
        Reported.from_values({"num_gpu_blocks": 10, "gpu_memory_utilization": "None"}).gpu_memory_utilization
        is None
    )


def test_the_finding_is_kept_as_messages_to_show_in_the_readers_language():
    sizing = sized()
    issue = compare(sizing, report(int(sizing.capacity.num_blocks * 0.7)), version="0.11.2").issue()
    text = issue.text()
    assert text["title"]["msgid"].startswith("The engine reports %(reported)s KV cache blocks")
    assert text["detail"]["params"]["version"] == "0.11.2"
    assert issue.title.startswith("The engine reports ")  # English kept for the API


# Through the capacity service: what the probes stored, kept as a finding.


def llama_instance(**flags):
    from tests.factories import make_gpu, make_host, make_instance

    host = make_host()
    flags.setdefault("served_model_name", "meta-llama/Llama-3.1-8B-Instruct")
    flags.setdefault("max_model_len", 32768)
    flags.setdefault("max_num_seqs", 256)
    flags.setdefault("max_num_batched_tokens", 8192)
    return make_instance(host, gpus=[make_gpu(host, model="h100-80gb")], **flags)


def stored(instance, **values):
    now = timezone.now()
    MetricSample.objects.bulk_create(
        MetricSample(instance=instance, name=name, ts=now, value=value) for name, value in values.items()
    )


def open_codes(instance):
    return set(CapacityFinding.objects.filter(instance=instance).active().values_list("code", flat=True))


@pytest.mark.django_db
def test_the_check_opens_a_drift_finding_from_stored_samples_and_clears_it_when_they_agree():
    instance = llama_instance()
    stored(instance, num_gpu_blocks=20_000, block_size=16, gpu_memory_utilization=0.8)
    capacity_service.check_fleet()
    finding = CapacityFinding.objects.get(instance=instance, code="live_sizing_drift")
    assert finding.cleared_at is None and finding.numbers["causes"][0] == "utilization_differs"
    live = InstanceSizing.objects.get(instance=instance).result["live"]
    assert live["reported"]["blocks"] == 20_000 and live["drifted"]

    predicted = InstanceSizing.objects.get(instance=instance).result["kv_cache_blocks"]
    stored(instance, num_gpu_blocks=predicted, block_size=16, gpu_memory_utilization=0.9)
    capacity_service.check_fleet()
    finding.refresh_from_db()
    assert finding.cleared_at is not None and "live_sizing_drift" not in open_codes(instance)
    assert not InstanceSizing.objects.get(instance=instance).result["live"]["drifted"]


@pytest.mark.django_db
def test_without_a_report_there_is_no_comparison_and_the_latest_stored_scrape_is_read_too():
    quiet = llama_instance()
    capacity_service.check_fleet()
    assert "live" not in InstanceSizing.objects.get(instance=quiet).result
    scraped = llama_instance()
    InstanceState.objects.create(
        instance=scraped,
        last_scrape={
            "timestamp": timezone.now().timestamp(),
            "engine": "vllm",
            "gauges": {"num_gpu_blocks": 9_000.0, "block_size": 16.0, "gpu_memory_utilization": 0.9},
        },
    )
    capacity_service.check_fleet()
    assert InstanceSizing.objects.get(instance=scraped).result["live"]["reported"]["blocks"] == 9_000
    assert "live_sizing_drift" in open_codes(scraped)


@pytest.mark.django_db
def test_the_instance_page_shows_predicted_against_reported(client, cast):
    instance = llama_instance()
    stored(instance, num_gpu_blocks=20_000, block_size=16, gpu_memory_utilization=0.8)
    capacity_service.check_fleet()
    client.force_login(cast.viewer)
    page = client.get(instance.get_absolute_url()).content.decode()
    assert 'id="live-sizing"' in page and "Reported by the running engine" in page
    assert "20,000" in page and "The engine reports 20,000 KV cache blocks" in page
    assert "<td>0.8</td>" in page and "differs" in page

    agreeing = llama_instance()
    capacity_service.check_fleet()  # sized once, to read the prediction
    predicted = InstanceSizing.objects.get(instance=agreeing).result["kv_cache_blocks"]
    stored(agreeing, num_gpu_blocks=predicted + 100, block_size=16, gpu_memory_utilization=0.9)
    capacity_service.check_fleet()
    page = client.get(agreeing.get_absolute_url()).content.decode()
    assert 'id="live-sizing"' in page and "+100" in page
    assert "the larger of 15 % of the cache and 2 GiB per GPU" in page


# Over real sockets: the simulator, probed by the metrics probe.


def _probe_and_check(instance, *, running_utilization):
    (spec,) = specs_from_inventory(load=LoadProfile(requests_per_s=0.5))
    if running_utilization != spec.gpu_memory_utilization:  # the engine runs with other flags
        spec = replace(spec, gpu_memory_utilization=running_utilization, num_gpu_blocks=None)
    with SimulatorThread([spec]):
        probe_service.run_cycle(kind="metrics")
    capacity_service.check_fleet()
    return InstanceSizing.objects.get(instance=instance).result.get("live")


@pytest.mark.django_db
def test_a_simulated_engine_running_another_utilization_than_the_inventory_raises_a_drift(quick_settings):
    (instance,) = simulated_instances(
        1,
        served_model_name="meta-llama/Llama-3.1-8B-Instruct",
        max_model_len=32768,
        max_num_seqs=256,
        max_num_batched_tokens=8192,
        gpu_memory_utilization=0.9,
    )
    live = _probe_and_check(instance, running_utilization=0.8)
    assert live is not None, "the metrics probe stored no num_gpu_blocks for the simulated engine"
    assert live["reported"]["gpu_memory_utilization"] == 0.8
    finding = CapacityFinding.objects.get(instance=instance, code="live_sizing_drift", cleared_at=None)
    assert "utilization_differs" in finding.numbers["causes"]
    assert "0.8, not 0.9" in finding.detail


@pytest.mark.django_db
def test_a_simulated_engine_running_the_inventorys_flags_raises_none(quick_settings):
    (instance,) = simulated_instances(
        1,
        served_model_name="meta-llama/Llama-3.1-8B-Instruct",
        max_model_len=32768,
        max_num_seqs=256,
        max_num_batched_tokens=8192,
        gpu_memory_utilization=0.9,
    )
    live = _probe_and_check(instance, running_utilization=0.9)
    assert live is not None, "the metrics probe stored no num_gpu_blocks for the simulated engine"
    assert live["causes"] == [] and not live["drifted"]
    assert "live_sizing_drift" not in open_codes(instance)
