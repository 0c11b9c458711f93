import json
import time

import pytest

from fleet.nvml.base import NvmlError
from fleet.probes.classify import Thresholds
from fleet.probes.gpu import GpuProbeResult
from fleet.probes.instance_probe import phases_request, probe_instance, probe_many
from fleet.probes.judgement import judge
from fleet.probes.outcomes import Outcome
from fleet.probes.parts import ALL_KINDS, ProbeKind, ProbeParts
from fleet.probes.readiness import ReadinessResult, RouteCheck
from fleet.probes.target import ProbeLimits, ProbeTarget
from tests.probes.engines import FAST, SLACK_S, VLLM_METRICS, make_target, token_stream, vllm_routes
from tests.probes.gpus import FixedBackend, gpu, reading
from tests.probes.servers import app, closed_port_url, hang, serve

pytestmark = pytest.mark.anyio


async def probe_at(client, url: str, **options):
    """probe_instance of the default target at url, fast limits."""
    values = {"previous_scrape": None, "limits": FAST} | options
    return await probe_instance(client=client, target=make_target(url), **values)


def judged(probe, thresholds=None, **options):
    """The one judgement of what a probe measured (default thresholds)."""
    return judge(target=probe.target, parts=probe.parts, thresholds=thresholds or Thresholds(), **options)


def test_a_probe_only_measures_it_does_not_judge():
    """No thresholds go in and no verdict comes out: the judgement is fleet.probes.judgement's."""
    import dataclasses
    import inspect

    from fleet.probes.instance_probe import InstanceProbe

    assert "thresholds" not in inspect.signature(probe_instance).parameters
    assert not {"classification", "numa"} & {f.name for f in dataclasses.fields(InstanceProbe)}


async def test_a_healthy_instance_is_probed_completely_and_is_up(http_client):
    async with serve(app(vllm_routes())) as url:
        probe = await probe_instance(
            client=http_client,
            target=make_target(url, api_key="sk-secret"),
            previous_scrape=None,
            limits=FAST,
        )
    assert judged(probe).classification.verdict == "up", judged(probe).classification.findings
    assert probe.outcome == Outcome.OK
    assert (probe.phases.outcome, probe.phases.status) == (Outcome.OK, 200)
    assert probe.phases.url.endswith("/v1/chat/completions")
    assert probe.stream.outcome == Outcome.OK
    assert probe.scrape.gauges["num_requests_running"] == 3.0
    stored = json.dumps(probe.to_dict(), allow_nan=False)
    assert "sk-secret" not in stored


async def test_the_next_probe_derives_rates_from_the_previous_scrape(http_client):
    async with serve(app(vllm_routes())) as url:
        first = await probe_at(http_client, url)
    later = VLLM_METRICS.replace("} 1000.0", "} 1500.0")
    async with serve(app(vllm_routes(metrics=later))) as url:
        second = await probe_instance(
            client=http_client,
            target=make_target(url),
            previous_scrape=first.scrape,
            limits=FAST,
        )
    assert second.derived["window_s"] > 0
    assert second.derived["generation_tokens_per_s"] == pytest.approx(500 / second.derived["window_s"])


async def test_a_slow_first_token_makes_the_instance_degraded(http_client):
    async with serve(app(vllm_routes(stream=token_stream(first_delay=0.6)))) as url:
        probe = await probe_instance(
            client=http_client,
            target=make_target(url),
            previous_scrape=None,
            limits=FAST,
        )
    classification = judged(probe, Thresholds(ttfb_s=0.5)).classification
    assert classification.verdict == "degraded"
    assert [f.code for f in classification.findings] == ["ttft.slow"]


async def test_gpu_state_and_numa_are_read_when_the_host_has_a_backend(http_client):
    hot = reading(gpu(0, numa_node=0, temperature_c=90, throttle_reasons=("sw_thermal_slowdown",)))
    async with serve(app(vllm_routes())) as url:
        probe = await probe_at(http_client, url, gpu_backend=FixedBackend(hot))
    result = judged(probe, instance_gpus=[{"index": 0, "numa_node": 1}])
    codes = [f.code for f in result.classification.findings]
    assert codes == ["gpu.thermal", "gpu.numa"]
    assert probe.to_dict()["gpus"]["reading"]["gpus"][0]["temperature_c"] == 90


async def test_an_nvml_failure_is_noted_without_changing_the_verdict(http_client):
    async with serve(app(vllm_routes())) as url:
        probe = await probe_at(http_client, url, gpu_backend=FixedBackend(NvmlError("no driver")))
    classification = judged(probe).classification
    assert classification.verdict == "up"
    assert classification.findings[0].evidence == "NVML could not be read: no driver"


async def test_the_light_health_check_generates_no_tokens_and_times_the_health_route(http_client):
    async with serve(app(vllm_routes())) as url:
        probe = await probe_at(
            http_client, url, kinds={ProbeKind.HEALTH, ProbeKind.METRICS}, light_health=True
        )
    assert probe.stream is None
    assert probe.phases.url.endswith("/health")


async def test_a_probe_of_one_kind_measures_that_kind_alone(http_client):
    async with serve(app(vllm_routes())) as url:
        probe = await probe_at(
            http_client, url, kinds={ProbeKind.METRICS}, gpu_backend=FixedBackend(reading(gpu(0)))
        )
    assert probe.kinds == {ProbeKind.METRICS}
    assert probe.readiness is None and probe.phases is None and probe.stream is None and probe.gpus is None
    assert probe.scrape.gauges["num_requests_running"] == 3.0
    stored = probe.to_dict()
    assert stored["kinds"] == ["metrics"] and stored["phases"] is None and stored["scrape"]["outcome"] == "ok"
    assert set(probe.kind_dicts) == {"metrics"}


async def test_a_probe_of_one_kind_is_judged_with_the_other_kinds_stored_results(http_client):
    """The metrics say nothing is wrong; the stored health result from a moment ago says the
    model is missing: the instance is judged on both."""
    stored_health = ReadinessResult(outcome=Outcome.OK, healthy=True, models=("other",), model_found=False)
    context = ProbeParts(readiness=stored_health)
    async with serve(app(vllm_routes())) as url:
        probe = await probe_at(http_client, url, kinds={ProbeKind.METRICS})
    parts = context.overlaid(probe.parts, probe.kinds)
    result = judge(target=probe.target, parts=parts, thresholds=Thresholds())
    assert [f.code for f in result.classification.findings] == ["model.mismatch"]
    assert parts.readiness is stored_health and probe.outcome == ""


def test_stored_results_read_back_as_they_were():
    parts = ProbeParts(
        readiness=ReadinessResult(
            outcome=Outcome.OK, healthy=True, models=("m",), model_found=True, version="0.11.0",
            checks=(RouteCheck(path="/health", outcome=Outcome.OK, status=200, elapsed_s=0.01),),
        ),
        gpus=GpuProbeResult(outcome=Outcome.OK, reading=reading(gpu(0, temperature_c=91))),
        derived={"num_requests_waiting": 12.0},
    )  # fmt: skip
    stored = json.loads(json.dumps(parts.to_kind_dicts(ALL_KINDS)))
    again = ProbeParts.from_kind_dicts(stored)
    assert again.readiness == parts.readiness and again.gpus == parts.gpus
    assert again.derived == parts.derived and again.stream is None


def test_a_stored_kind_that_no_longer_reads_is_left_out():
    stored = {"health": {"readiness": {"nonsense": 1}}, "metrics": {"derived": {"a": 1}}}
    again = ProbeParts.from_kind_dicts(stored)
    assert again.readiness is None and again.derived == {"a": 1.0}


async def test_probe_many_keeps_the_order_and_bounds_every_probe():
    async with serve(app(vllm_routes())) as healthy, serve(hang) as hung:
        targets = [
            make_target(closed_port_url(), instance_id=1),
            make_target(healthy, instance_id=2),
            make_target(hung, instance_id=3),
        ]
        started = time.perf_counter()
        probes = await probe_many(targets=targets, previous_scrapes={}, limits=FAST, concurrency=2)
    elapsed = time.perf_counter() - started
    assert [p.target.instance_id for p in probes] == [1, 2, 3]
    assert [judged(p).classification.verdict for p in probes] == ["down", "up", "down"]
    assert [p.outcome for p in probes] == [Outcome.REFUSED, Outcome.OK, Outcome.READ_TIMEOUT]
    # two waves at most (concurrency 2), each bounded by the stream deadline
    assert elapsed < 2 * FAST.stream_deadline_s + SLACK_S


@pytest.mark.parametrize(
    ("engine", "path", "limit"),
    [
        ("vllm", "/v1/chat/completions", ("max_tokens", 1)),
        ("tgi", "/generate", ("max_new_tokens", 1)),
        ("ollama", "/api/chat", ("num_predict", 1)),
    ],
)
def test_phases_are_timed_on_a_one_token_generation_on_the_engine_s_native_route(engine, path, limit):
    request = phases_request(make_target("http://h:1", engine, api_key="k"), generate=True)
    assert request["url"] == "http://h:1" + path
    body = json.dumps(request["json"])
    assert f'"{limit[0]}": {limit[1]}' in body and '"stream": true' not in body
    assert request["headers"] == {"Authorization": "Bearer k"}


def test_the_light_sweep_checks_readiness_on_the_timed_health_request_alone():
    import asyncio as _asyncio

    from fleet.probes.fetch import make_instance_client
    from fleet.probes.instance_probe import probe_instance
    from fleet.simulator.fleet_runner import SimulatorThread
    from fleet.simulator.spec import InstanceSpec, LoadProfile

    spec = InstanceSpec(name="light", served_model_name="m", port=0, load=LoadProfile(requests_per_s=0.0))
    with SimulatorThread([spec]) as sim:
        target = ProbeTarget(instance_id=1, name="light", engine="vllm", engine_version=spec.version,
                             base_url=sim.url("light"), served_model_name="m", api_key=None,
                             max_num_seqs=None, max_model_len=None)  # fmt: skip

        async def probe():
            async with make_instance_client(limits=ProbeLimits()) as client:
                return await probe_instance(client=client, target=target, previous_scrape=None,
                                            limits=ProbeLimits(),
                                            kinds={ProbeKind.HEALTH, ProbeKind.METRICS},
                                            light_health=True)  # fmt: skip

        result = _asyncio.run(probe())
        lines = sim.call(lambda: sim.runner.instance("light").access_log_lines(limit=100))
    requests = sorted(line.split('"')[1].split()[1] for line in lines)
    assert result.readiness.healthy and judged(result).classification.verdict == "up"
    assert requests == ["/health", "/metrics"]
