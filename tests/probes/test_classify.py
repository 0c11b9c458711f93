import pytest

from fleet.nvml.base import GpuProcess, GpuState
from fleet.probes.classify import Classification, Finding, StateStep, Thresholds, classify, next_state
from fleet.probes.findings import Category
from fleet.probes.gpu import GpuProbeResult
from fleet.probes.outcomes import Outcome
from fleet.probes.phases import PhaseResult
from fleet.probes.readiness import ReadinessResult, RouteCheck
from fleet.probes.scrape import Scrape, ScrapeResult
from fleet.probes.streaming import StreamResult
from tests.probes.engines import MODEL, make_target
from tests.probes.gpus import gpu, reading

BASE = "http://10.0.0.5:8000"
TARGET = make_target(BASE, max_num_seqs=256)
CHAT = f"{BASE}/v1/chat/completions"
DEFAULTS = Thresholds()


def ready(**overrides) -> ReadinessResult:
    values = {
        "outcome": Outcome.OK,
        "healthy": True,
        "models": (MODEL,),
        "model_found": True,
        "checks": (RouteCheck(path="/health", outcome=Outcome.OK, status=200),),
    }
    return ReadinessResult(**(values | overrides))


def failed(
    outcome: Outcome, *, status=None, error="", path="/health", elapsed=0.0, **overrides
) -> ReadinessResult:
    check = RouteCheck(path=path, outcome=outcome, status=status, error=error, elapsed_s=elapsed)
    return ReadinessResult(outcome=outcome, error=error, checks=(check,), **overrides)


def phases(**overrides) -> PhaseResult:
    values = {
        "url": CHAT,
        "method": "POST",
        "outcome": Outcome.OK,
        "status": 200,
        "dns_s": 0.0,
        "connect_s": 0.01,
        "ttfb_s": 0.4,
        "total_s": 0.45,
    }
    return PhaseResult(**(values | overrides))


def gpus(*states: GpuState) -> GpuProbeResult:
    return GpuProbeResult(outcome=Outcome.OK, reading=reading(*states))


def judge(
    *,
    readiness=None,
    phase=None,
    stream=None,
    derived=None,
    gpu_result=None,
    target=TARGET,
    thresholds=DEFAULTS,
    **extra,
) -> Classification:
    return classify(
        readiness=readiness or ready(),
        phases=phase or phases(),
        stream=stream,
        derived=derived or {},
        gpus=gpu_result,
        target=target,
        thresholds=thresholds,
        **extra,
    )


def only(result: Classification) -> Finding:
    assert len(result.findings) == 1, result.findings
    return result.findings[0]


def test_a_healthy_instance_is_up_with_no_findings():
    assert judge() == Classification(verdict="up", findings=())


def test_connect_above_one_second_is_the_network():
    finding = only(judge(phase=phases(connect_s=1.4, ttfb_s=1.6, total_s=1.7)))
    assert (finding.code, finding.category, finding.severity) == (
        "connect.slow",
        "timeout.network",
        "degraded",
    )
    assert finding.evidence == "Connect 1.40 s > 1 s, so the network"


def test_ttfb_above_five_seconds_is_ttft():
    result = judge(phase=phases(ttfb_s=7.2, total_s=7.3))
    assert result.verdict == "degraded"
    assert only(result).evidence == "TTFB 7.2 s > 5 s on /v1/chat/completions, so TTFT"
    assert only(result).category == "timeout.ttft"


def test_a_large_total_minus_ttfb_is_tps():
    finding = only(judge(phase=phases(ttfb_s=0.5, total_s=12.5)))
    assert (finding.code, finding.category) == ("decode.slow", "timeout.tps")
    assert finding.evidence == "Total − TTFB 12.0 s > 10 s on /v1/chat/completions, so TPS"


def test_the_stream_s_ttft_and_decode_time_follow_the_same_rules():
    stream = StreamResult(
        outcome=Outcome.OK, ttft_s=6.1, total_s=17.0, completion_tokens=16, output_tokens_per_s=16 / 10.9
    )
    codes = {f.code: f.evidence for f in judge(stream=stream).findings}
    assert codes["ttft.slow"] == "TTFT 6.1 s > 5 s in the stream probe, so TTFT"
    assert codes["tps.slow"] == "Total − TTFT 10.9 s > 10 s for 16 tokens (1.5 tokens/s), so TPS"


def test_more_than_ten_waiting_is_a_backlog():
    finding = only(judge(derived={"num_requests_waiting": 12}))
    assert (finding.code, finding.category) == ("queue.backlog", "rate_limit.queue")
    assert finding.evidence == "12 requests waiting > 10, so a backlog"


def test_running_near_max_num_seqs_is_a_full_batch():
    finding = only(judge(derived={"num_requests_running": 250}))
    assert finding.code == "batch.full"
    assert finding.evidence == "250 running of max_num_seqs 256 (98% ≥ 95%), so the batch is full"


def test_a_full_batch_needs_a_known_max_num_seqs():
    assert (
        judge(derived={"num_requests_running": 250}, target=make_target(BASE, max_num_seqs=None)).verdict
        == "up"
    )


def test_high_kv_usage_alone_is_only_informational():
    result = judge(derived={"kv_cache_usage": 0.97, "num_requests_waiting": 0})
    assert result.verdict == "up"
    assert only(result).code == "kv.high"
    assert only(result).severity == "info"
    assert "the cache is doing its job (not a fault)" in only(result).evidence


def test_high_kv_usage_with_preemptions_is_kv_pressure():
    result = judge(derived={"kv_cache_usage": 0.97, "num_requests_waiting": 2, "preemptions_per_s": 0.4})
    codes = {f.code: f for f in result.findings}
    assert result.verdict == "degraded"
    assert codes["kv.pressure"].evidence == (
        "KV cache 97% used > 90% with 2 waiting and 0.40 preemptions/s: requests wait for KV blocks"
    )
    assert codes["kv.preemptions"].evidence == (
        "0.40 preemptions/s > 0: the KV cache is full and requests are recomputed (not an OOM)"
    )
    assert codes["kv.preemptions"].category == "oom.kv_pressure"


def test_swap_is_flagged_for_v0_engines():
    finding = only(judge(derived={"cpu_cache_usage": 0.12, "num_requests_swapped": 3}))
    assert finding.evidence == (
        "KV blocks swapped to CPU (cpu_cache_usage 12%, 3 requests swapped), "
        "so TPS drops (vLLM 0.7 / V0 only)"
    )


def test_ttft_p95_above_the_threshold_is_ttft():
    finding = only(judge(derived={"ttft_p95_s": 6.25, "window_s": 30}))
    assert finding.evidence == "TTFT p95 6.25 s > 5 s over the last 30 s"


def test_aborts_and_errors_above_five_percent_are_failing_requests():
    finding = only(judge(derived={"requests_per_s": 2.0, "request_errors_per_s": 0.3}))
    assert (finding.code, finding.category) == ("requests.failing", "server.5xx")
    assert finding.evidence == (
        "0.30 of 2.00 requests/s ended in abort or error (15% > 5%), "
        "by request_success_total's finished_reason"
    )


def test_health_500_on_a_current_vllm_is_a_server_error_not_a_dead_engine():
    broken = failed(Outcome.BAD_STATUS, status=500, error="HTTP 500", version="0.11.2")
    finding = judge(readiness=broken, phase=phases(outcome=Outcome.BAD_STATUS, status=500)).findings[0]
    assert (finding.code, finding.category, finding.severity) == ("health.http_500", "server.5xx", "down")


def test_health_503_while_requests_get_503_too_is_not_a_dead_engine():
    busy = failed(Outcome.BAD_STATUS, status=503, error="HTTP 503", version="0.11.2")
    finding = judge(readiness=busy, phase=phases(outcome=Outcome.BAD_STATUS, status=503)).findings[0]
    assert (finding.code, finding.category) == ("health.http_503", "server.5xx")


def test_health_500_is_the_dead_engine_of_vllm_0_10_and_earlier():
    dead = failed(Outcome.BAD_STATUS, status=500, error="HTTP 500", version="0.10.2")
    finding = judge(readiness=dead, phase=phases(outcome=Outcome.BAD_STATUS, status=500)).findings[0]
    assert finding.code == "engine.dead"


def test_a_refused_connection_is_down_and_says_vllm_may_still_be_loading():
    result = judge(
        readiness=failed(Outcome.REFUSED, error="ConnectError: refused"),
        phase=phases(outcome=Outcome.REFUSED, connect_s=None, ttfb_s=None),
    )
    assert result.verdict == "down"
    finding = only(result)
    assert (finding.code, finding.category) == ("connect.refused", "process.not_started")
    assert finding.evidence == (
        f"Connection refused on {BASE}: nothing listens on the port; vLLM binds its port only after loading "
        "the model, so it is starting or gone"
    )


def test_refused_with_no_process_on_its_gpus_means_the_process_is_gone():
    result = judge(readiness=failed(Outcome.REFUSED), gpu_result=gpus(gpu(0), gpu(1)), gpu_indices=[0, 1])
    assert result.findings[0].code == "process.gone"
    assert result.findings[0].evidence.endswith("and no process runs on its GPU 0, 1: the engine is gone")


def test_refused_while_a_process_holds_its_gpu_means_still_loading():
    loading = gpu(0, processes=(GpuProcess(pid=42, name="python", used_memory_mib=30000),))
    result = judge(readiness=failed(Outcome.REFUSED), gpu_result=gpus(loading), gpu_indices=[0])
    assert result.findings[0].code == "connect.refused"
    assert (
        "a process holds GPU 0 (30000 MiB), so the engine is probably still loading"
        in result.findings[0].evidence
    )


def test_a_hung_health_route_is_down():
    finding = only(judge(readiness=failed(Outcome.READ_TIMEOUT, elapsed=10.0)))
    assert (finding.code, finding.category, finding.severity) == (
        "health.timeout",
        "process.unresponsive",
        "down",
    )
    assert (
        finding.evidence
        == "/health accepted the connection but did not answer in 10.0 s: the API server is hung"
    )


def test_health_503_with_requests_failing_500_is_a_dead_engine_from_vllm_0_11():
    dead = failed(Outcome.BAD_STATUS, status=503, error="HTTP 503", engine_dead=True, version="0.11.2")
    finding = judge(readiness=dead, phase=phases(outcome=Outcome.BAD_STATUS, status=500)).findings[0]
    assert (finding.code, finding.category, finding.severity) == (
        "engine.dead",
        "process.engine_dead",
        "down",
    )
    assert finding.evidence.startswith("/health returned 503: the engine is dead")


def test_a_model_the_server_does_not_list_is_a_mismatch():
    finding = only(judge(readiness=ready(models=("other/model", "lora-x"), model_found=False)))
    assert (finding.code, finding.category, finding.severity) == (
        "model.mismatch",
        "config.model_name",
        "down",
    )
    assert finding.evidence == (
        f"served_model_name {MODEL!r} is not among the models the server lists (other/model, lora-x): "
        "requests for it get 404"
    )


def test_429_from_vllm_points_at_the_gateway():
    phase = phases(
        outcome=Outcome.BAD_STATUS, status=429, error="HTTP 429: 429 Too Many Requests", server="nginx"
    )
    finding = only(judge(phase=phase))
    assert (finding.code, finding.category) == ("http.429", "rate_limit.http_429")
    assert finding.evidence == (
        "HTTP 429: 429 Too Many Requests from /v1/chat/completions (Server: nginx): "
        "vLLM itself never answers 429, so a gateway in front of it limited the request"
    )


def test_a_503_on_ollama_is_its_full_queue():
    phase = phases(outcome=Outcome.BAD_STATUS, status=503, error="HTTP 503: server busy")
    finding = only(judge(phase=phase, target=make_target(BASE, "ollama")))
    assert finding.category == "rate_limit.queue"
    assert "Ollama's queue is full (OLLAMA_MAX_QUEUE)" in finding.evidence


def test_the_same_failure_seen_by_several_probes_is_one_finding():
    result = judge(
        readiness=failed(Outcome.CONNECT_TIMEOUT, error="ConnectTimeout"),
        phase=phases(outcome=Outcome.CONNECT_TIMEOUT, error="ConnectTimeout"),
        stream=StreamResult(outcome=Outcome.CONNECT_TIMEOUT, error="ConnectTimeout"),
    )
    assert [f.code for f in result.findings] == ["connect.timeout"]
    assert result.findings[0].severity == "down"


def test_thermal_throttle_reasons_are_the_evidence():
    hot = gpu(0, temperature_c=88, sm_clock_mhz=1410, throttle_reasons=("hw_thermal_slowdown",))
    finding = only(judge(gpu_result=gpus(hot)))
    assert (finding.code, finding.category, finding.severity) == ("gpu.thermal", "gpu.thermal", "degraded")
    assert finding.evidence == "GPU 0: NVML reports hw_thermal_slowdown at 88 °C, SM clock 1410 of 1980 MHz"


def test_a_hot_gpu_without_throttle_reasons_is_only_a_hint():
    finding = only(judge(gpu_result=gpus(gpu(0, temperature_c=87))))
    assert (finding.code, finding.severity) == ("gpu.hot", "info")
    assert finding.evidence == "GPU 0 at 87 °C ≥ 85 °C, but NVML reports no thermal slowdown: a hint only"


def test_saturated_sms_are_degraded_only_beside_a_latency_finding():
    busy = gpus(gpu(0, sm_utilization_pct=99))
    assert only(judge(gpu_result=busy)).severity == "info"
    with_ttft = judge(gpu_result=busy, phase=phases(ttfb_s=7.0, total_s=7.1))
    saturated = next(f for f in with_ttft.findings if f.code == "gpu.saturated")
    assert saturated.severity == "degraded"
    assert saturated.evidence == "GPU 0 SM utilization 99 % > 95 %, so it is saturated"


def test_a_fatal_xid_is_down_and_ecc_errors_are_degraded():
    result = judge(gpu_result=gpus(gpu(0, xid_errors=(79,)), gpu(1, ecc_uncorrected_volatile=2)))
    codes = {f.code: f for f in result.findings}
    assert result.verdict == "down"
    assert codes["gpu.xid"].evidence == "GPU 0: XID 79 (GPU has fallen off the bus)"
    assert codes["gpu.ecc"].evidence == "GPU 1: 2 uncorrected ECC errors since the driver loaded"


def test_gpu_rules_look_only_at_the_instance_s_gpus():
    result = judge(gpu_result=gpus(gpu(0), gpu(1, xid_errors=(79,))), gpu_indices=[0])
    assert result.verdict == "up"


def test_numa_messages_become_informational_findings():
    finding = only(judge(numa=("GPU 1: the inventory says NUMA node 0, NVML says 1",)))
    assert (finding.code, finding.category, finding.severity) == ("gpu.numa", "gpu.numa", "info")


def test_metrics_without_engine_series_are_noted():
    scraped = ScrapeResult(outcome=Outcome.OK, scrape=Scrape(timestamp=1.0, engine="vllm"))
    finding = only(judge(scrape=scraped))
    assert finding.evidence == "/metrics has no engine series (vLLM's --disable-log-stats turns them off)"


def test_a_version_other_than_the_inventory_s_is_noted():
    finding = only(judge(readiness=ready(version="0.8.5"), target=make_target(BASE, engine_version="0.11.2")))
    assert (finding.code, finding.severity) == ("version.mismatch", "info")


def test_findings_come_most_severe_first():
    result = judge(
        readiness=ready(models=("x",), model_found=False),
        derived={"kv_cache_usage": 0.99, "num_requests_waiting": 11},
    )
    assert [f.severity for f in result.findings] == ["down", "degraded", "degraded"]


def test_thresholds_are_editable():
    assert judge(derived={"num_requests_waiting": 12}, thresholds=Thresholds(waiting=20)).verdict == "up"


def _down(source: str) -> Finding:
    return Finding(code=f"{source}.x", category=Category.GONE, severity="down", evidence="x", source=source)


DOWN = Classification(verdict="down", findings=(_down("readiness"),))
UP = Classification(verdict="up", findings=())
QUEUED = Finding(code="q", category=Category.QUEUE, severity="degraded", evidence="q", source="metrics")
DEGRADED = Classification(verdict="degraded", findings=(QUEUED,))


def step(classification, *, previous="up", failures=None, measured=("health",), n=3):
    return next_state(
        previous_state=previous,
        failures=failures or {},
        classification=classification,
        thresholds=Thresholds(down_after_failures=n),
        measured=measured,
    )


def test_an_instance_turns_down_only_after_n_failed_runs_in_a_row():
    state, failures, seen = "up", {}, []
    for _ in range(3):
        result = step(DOWN, previous=state, failures=failures)
        state, failures = result.verdict, result.failures
        seen.append((state, failures, result.pending))
    assert seen == [
        ("failing", {"health": 1}, 1),
        ("failing", {"health": 2}, 2),
        ("down", {"health": 3}, 0),
    ]


def test_a_success_resets_the_failure_count():
    assert step(UP, failures={"health": 2}) == StateStep(verdict="up", failures={})
    assert step(UP, previous="down", failures={"health": 7}).verdict == "up"


def test_degraded_is_its_own_state_and_not_a_failure():
    assert step(DEGRADED, failures={"health": 2}, measured=("metrics", "health")) == StateStep(
        verdict="degraded", failures={}
    )


@pytest.mark.parametrize("previous", ["unknown", "up", "degraded"])
def test_a_failed_run_below_the_limit_is_failing_never_green(previous):
    assert step(DOWN, previous=previous) == StateStep(verdict="failing", failures={"health": 1}, pending=1)


def test_a_down_instance_stays_down_while_it_keeps_failing():
    assert step(DOWN, previous="down").verdict == "down"


def test_a_failed_run_below_the_limit_is_failing_whatever_else_the_other_kinds_found():
    both = Classification(verdict="down", findings=(_down("readiness"), *DEGRADED.findings))
    assert step(both, previous="up").verdict == "failing"


def test_each_kind_counts_only_its_own_runs():
    """A health failure stored from an earlier run is not counted again by a metrics run."""
    after_metrics = step(DOWN, failures={"health": 1}, measured=("metrics",))
    assert after_metrics.failures == {"health": 1} and after_metrics.verdict == "failing"
    after_health = step(DOWN, failures=after_metrics.failures, measured=("health",))
    assert after_health.failures == {"health": 2}


def test_a_fatal_gpu_error_counts_against_the_gpu_kind():
    xid = Classification(verdict="down", findings=(_down("gpu"),))
    result = step(xid, failures={"gpu": 2}, measured=("gpu",))
    assert (result.verdict, result.failures) == ("down", {"gpu": 3})
