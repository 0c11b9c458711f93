"""The one judgement of an instance, across probe kinds: hung but healthy, a generation
speed drop against the instance's usual rate (with throttling as its cause), and KV
pressure that stalls an engine without it being hung."""

from fleet.probes.findings import Thresholds
from fleet.probes.gpu import GpuProbeResult
from fleet.probes.judgement import BASELINE_MIN_SAMPLES, judge, updated_baselines
from fleet.probes.outcomes import Outcome
from fleet.probes.parts import ProbeParts
from fleet.probes.streaming import StreamResult
from tests.probes.engines import make_target
from tests.probes.gpus import gpu, reading
from tests.probes.test_classify import phases, ready

TARGET = make_target("http://10.0.0.5:8000", max_num_seqs=256)
NO_TOKENS = {
    "num_requests_running": 3.0,
    "num_requests_waiting": 5.0,
    "generation_tokens_per_s": 0.0,
    "prompt_tokens_per_s": 0.0,
    "window_s": 30.0,
}
NO_FIRST_TOKEN = StreamResult(outcome=Outcome.READ_TIMEOUT, error="ReadTimeout after 10 s")
# the usual stream rate, with one slow stream already seen (a drop by the stream needs two)
USUAL = {"stream_tps": 40.0, "stream_tps_n": BASELINE_MIN_SAMPLES["stream_tps"], "stream_tps_slow": 1}


def stream(tokens_per_s: float) -> StreamResult:
    return StreamResult(outcome=Outcome.OK, ttft_s=0.2, total_s=0.6, output_tokens_per_s=tokens_per_s)


def judged(*, baselines=None, thresholds=None, fresh=frozenset({"stream", "metrics"}), **parts):
    values = {"readiness": ready()} | parts
    th = thresholds or Thresholds()
    return judge(target=TARGET, parts=ProbeParts(**values), thresholds=th, baselines=baselines, fresh=fresh)


def codes(judgement) -> dict[str, str]:
    return {f.code: f.category for f in judgement.classification.findings}


def test_health_200_with_no_token_generated_and_work_queued_is_hung_but_healthy():
    result = judged(derived=NO_TOKENS, stream=NO_FIRST_TOKEN)
    hung = result.classification.findings[0]
    assert (hung.code, hung.category, hung.severity) == ("engine.hung", "process.hung", "down")
    assert hung.evidence.startswith(
        "/health answers 200, but the engine processed no token in 30 s with 3 running"
    )
    assert "the stream probe got no first token" in hung.evidence
    assert "stream.no_first_token" not in codes(result)  # the hang explains it


def test_an_engine_still_prefilling_is_not_hung():
    prefilling = NO_TOKENS | {"prompt_tokens_per_s": 1800.0}
    assert "engine.hung" not in codes(judged(derived=prefilling))


def test_an_engine_that_still_steps_is_not_hung_even_before_any_first_token():
    """A very slow prefill: no prompt or output token counted yet, but the engine steps."""
    stepping = NO_TOKENS | {"engine_steps_per_s": 2.0, "scheduled_tokens_per_s": 4096.0}
    assert "engine.hung" not in codes(judged(derived=stepping, stream=NO_FIRST_TOKEN))


def test_no_engine_step_while_our_own_requests_get_nothing_is_hung_even_with_an_empty_queue():
    """The stalled engine dropped its queue (the clients gave up); our probes still hang."""
    idle_counts = NO_TOKENS | {"num_requests_running": 0.0, "num_requests_waiting": 0.0}
    stalled = idle_counts | {"engine_steps_per_s": 0.0, "scheduled_tokens_per_s": 0.0}
    timed_out = phases(outcome=Outcome.READ_TIMEOUT, ttfb_s=None, total_s=None)
    found = codes(judged(derived=stalled, stream=NO_FIRST_TOKEN, phases=timed_out))
    assert found.get("engine.hung") == "process.hung"


def test_any_token_of_our_own_means_it_is_not_hung():
    assert "engine.hung" not in codes(judged(derived=NO_TOKENS, stream=stream(30.0)))
    assert "engine.hung" not in codes(judged(derived=NO_TOKENS, phases=phases()))


def test_an_idle_engine_is_not_hung():
    idle = NO_TOKENS | {"num_requests_running": 0.0, "num_requests_waiting": 0.0}
    assert judged(derived=idle).classification.verdict == "up"


def test_a_standstill_with_the_kv_cache_full_is_kv_not_a_hang():
    starved = NO_TOKENS | {"kv_cache_usage": 0.99}
    found = codes(judged(derived=starved, stream=NO_FIRST_TOKEN))
    assert found.get("kv.high") == "oom.kv_pressure" and "engine.hung" not in found
    queued = codes(judged(derived=starved | {"num_requests_waiting": 40.0}, stream=NO_FIRST_TOKEN))
    assert queued.get("kv.pressure") == "oom.kv_pressure" and "engine.hung" not in queued


def test_a_request_or_two_waiting_between_steps_is_not_kv_pressure():
    assert "kv.pressure" not in codes(judged(derived={"kv_cache_usage": 0.97, "num_requests_waiting": 2.0}))


def test_kv_usage_high_with_nothing_waiting_is_no_fault():
    result = judged(derived={"kv_cache_usage": 0.97, "num_requests_waiting": 0.0})
    assert result.classification.verdict == "up"
    assert result.classification.findings[0].severity == "info"


def test_a_generation_speed_drop_against_the_usual_rate_is_tps():
    result = judged(stream=stream(12.0), baselines=USUAL)
    drop = result.classification.findings[0]
    assert (drop.code, drop.category, drop.severity) == ("tps.drop", "timeout.tps", "degraded")
    assert drop.evidence.startswith(
        "Generation at 12.0 tokens/s per request against a usual 40.0 (-70%, by the stream probe), so TPS"
    )
    assert "NVML shows no throttling" in drop.evidence
    assert result.baselines == USUAL | {"stream_tps_slow": 2}  # the usual rate stays


def test_a_stored_slow_stream_is_not_counted_again_by_another_kind_s_run():
    result = judged(stream=stream(12.0), baselines=USUAL, fresh=frozenset({"health"}))
    assert "tps.drop" not in codes(result) and result.baselines is None


def test_one_slow_stream_of_ours_is_not_yet_a_drop_but_counts_towards_one():
    first = {"stream_tps": 40.0, "stream_tps_n": BASELINE_MIN_SAMPLES["stream_tps"]}
    result = judge(
        target=TARGET,
        parts=ProbeParts(readiness=ready(), stream=stream(12.0)),
        thresholds=Thresholds(),
        baselines=first,
        fresh=frozenset({"stream"}),
    )
    assert "tps.drop" not in codes(result)
    assert result.baselines == first | {"stream_tps_slow": 1}  # the usual rate stays


def test_throttling_on_the_gpus_is_named_as_the_cause_of_the_drop():
    hot = GpuProbeResult(
        outcome=Outcome.OK,
        reading=reading(gpu(0, temperature_c=91, throttle_reasons=("hw_thermal_slowdown",))),
    )
    found = {
        f.code: f for f in judged(stream=stream(12.0), baselines=USUAL, gpus=hot).classification.findings
    }
    assert "the cause: GPU 0: NVML reports hw_thermal_slowdown at 91 °C" in found["tps.drop"].evidence
    assert found["gpu.thermal"].category == "gpu.thermal"


def test_the_engine_s_inter_token_latency_is_the_measure_where_it_is_exported():
    usual = {"engine_tps@1": 50.0, "engine_tps@1_n": BASELINE_MIN_SAMPLES["engine_tps"]}
    slow = judged(derived={"itl_mean_s": 0.2}, stream=stream(49.0), baselines=usual)
    drop = {f.code: f for f in slow.classification.findings}["tps.drop"]
    expected = "5.0 tokens/s per request against a usual 50.0 (-90%, by the engine's inter-token latency"
    assert expected + " at a batch of 1+)" in drop.evidence
    steady = judged(derived={"itl_mean_s": 0.021}, stream=stream(5.0), baselines=usual)
    assert "tps.drop" not in codes(steady)  # one slow stream of ours does not outvote the engine


def test_a_bigger_batch_is_compared_with_the_usual_speed_of_a_bigger_batch():
    """Per-request speed falls as the batch grows; that alone is no drop."""
    usual = {"engine_tps@1": 150.0, "engine_tps@1_n": 5}
    busy = judged(derived={"itl_mean_s": 0.017, "num_requests_running": 13.0}, baselines=usual)
    assert "tps.drop" not in codes(busy)
    assert busy.baselines["engine_tps@8"] == round(1 / 0.017, 3)


def test_a_slowdown_that_grows_the_batch_stays_a_drop_until_a_known_batch_is_healthy_again():
    usual = {"engine_tps@1": 150.0, "engine_tps@1_n": 5}
    first = judged(derived={"itl_mean_s": 0.05, "num_requests_running": 1.0}, baselines=usual)
    assert "tps.drop" in codes(first) and first.baselines["engine_tps_dropping"] == 150.0
    piled_up = judged(derived={"itl_mean_s": 0.06, "num_requests_running": 9.0}, baselines=first.baselines)
    assert "tps.drop" in codes(piled_up)
    assert "engine_tps@8" not in piled_up.baselines  # the new batch size is not learnt while slow
    healthy = judged(derived={"itl_mean_s": 0.0068, "num_requests_running": 1.0}, baselines=first.baselines)
    assert "tps.drop" not in codes(healthy) and "engine_tps_dropping" not in healthy.baselines


def test_no_drop_is_judged_before_the_usual_rate_is_known():
    young = {"stream_tps": 40.0, "stream_tps_n": BASELINE_MIN_SAMPLES["stream_tps"] - 1}
    assert "tps.drop" not in codes(judged(stream=stream(12.0), baselines=young))


def test_a_healthy_stream_moves_the_usual_rate():
    usual = {"stream_tps": 40.0, "stream_tps_n": 3}
    moved = {"stream_tps": 42.0, "stream_tps_n": 4, "stream_tps_slow": 0}
    assert updated_baselines(ProbeParts(stream=stream(50.0)), usual) == moved
    engine = ProbeParts(derived={"itl_mean_s": 0.02})
    assert updated_baselines(engine, {}) == {
        "engine_tps@1": 50.0,
        "engine_tps@1_n": 1,
        "engine_tps@1_slow": 0,
    }
    first = {"stream_tps": 30.0, "stream_tps_n": 1, "stream_tps_slow": 0}
    assert updated_baselines(ProbeParts(stream=stream(30.0)), {}) == first
    fresh = judge(
        target=TARGET,
        parts=ProbeParts(stream=stream(30.0)),
        thresholds=Thresholds(),
        fresh=frozenset({"stream"}),
    )
    assert fresh.baselines == first


def test_a_bug_in_the_rules_becomes_a_finding():
    broken = ProbeParts(derived={"num_requests_waiting": "many"})  # type: ignore[dict-item]
    result = judge(target=TARGET, parts=broken, thresholds=Thresholds())
    assert result.classification.findings[0].code == "probe.bug"
