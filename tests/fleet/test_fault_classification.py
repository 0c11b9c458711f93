"""Every fault the simulator can inject is classified right, over real sockets, on time.

One simulated vLLM instance per fault; each is probed the way the scheduled cycle does
(readiness, phases, a short stream, the metrics scrape and the GPU state), then judged
once on all of it (fleet.probes.judgement). Each finding names its taxonomy category.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from fleet.nvml.simulated_backend import SimulatedNvmlBackend
from fleet.probes.classify import Thresholds
from fleet.probes.fetch import make_instance_client
from fleet.probes.instance_probe import probe_instance
from fleet.probes.judgement import judge
from fleet.probes.target import ProbeLimits, ProbeTarget
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.spec import InstanceSpec, LoadProfile
from tests.fleet.probing import free_ports

LIMITS = ProbeLimits(connect_timeout_s=1, read_timeout_s=2, total_deadline_s=4, stream_deadline_s=6)
THRESHOLDS = Thresholds(ttfb_s=1.0, ttft_p95_s=0.5)
# fault, the verdict, a finding code that must be among the findings, and its category
CASES = [
    ({"kind": "refuse_connections"}, "down", "connect.refused", "process.not_started"),
    ({"kind": "hang"}, "down", "health.timeout", "process.unresponsive"),
    ({"kind": "slow_headers", "delay_s": 1.5}, "degraded", "ttfb.slow", "timeout.ttft"),
    ({"kind": "http_500"}, "down", "health.http_500", "server.5xx"),
    ({"kind": "http_503", "paths": ["/v1"]}, "degraded", "http.503", "rate_limit.queue"),
    ({"kind": "crash"}, "down", "connect.refused", "process.not_started"),
    ({"kind": "malformed_metrics"}, "up", "metrics.unavailable", "probe.metrics"),
    ({"kind": "huge_metrics"}, "up", "metrics.unavailable", "probe.metrics"),
    ({"kind": "tps_drop", "factor": 50}, "degraded", "gpu.thermal", "gpu.thermal"),
    # nearly all blocks taken: high usage shows, and whether requests queue behind it yet
    # depends on the traffic of that moment (corrections #11: usage alone is not a fault)
    (
        {"kind": "kv_near_full", "fraction": 0.99},
        ("up", "degraded"),
        ("kv.high", "kv.pressure"),
        "oom.kv_pressure",
    ),
    ({"kind": "queue_backlog", "n": 200}, "degraded", "queue.backlog", "rate_limit.queue"),
    ({"kind": "gpu_xid"}, "down", "gpu.xid", "cuda.xid"),
    ({"kind": "engine_dead"}, "down", "engine.dead", "process.engine_dead"),
    ({"kind": "engine_stall"}, "down", "engine.hung", "process.hung"),
]
DEADLINE_S = max(LIMITS.total_deadline_s, LIMITS.stream_deadline_s)


def _target(spec: InstanceSpec, index: int) -> ProbeTarget:
    return ProbeTarget(
        instance_id=index, name=spec.name, engine="vllm", engine_version=spec.version,
        base_url=f"http://127.0.0.1:{spec.port}", served_model_name=spec.served_model_name,
        api_key=None, max_num_seqs=spec.max_num_seqs, max_model_len=spec.max_model_len,
    )  # fmt: skip


async def _probe(spec: InstanceSpec, index: int, previous=None):
    backend = SimulatedNvmlBackend(f"http://127.0.0.1:{spec.port}/_sim/nvml", timeout=2)
    async with make_instance_client(limits=LIMITS) as client:
        started = time.perf_counter()
        probe = await probe_instance(client=client, target=_target(spec, index), previous_scrape=previous,
                                     limits=LIMITS, gpu_backend=backend)  # fmt: skip
        return probe, time.perf_counter() - started


def judged(probe):
    return judge(target=probe.target, parts=probe.parts, thresholds=THRESHOLDS).classification


@pytest.fixture(scope="module")
def faulted():
    specs = [InstanceSpec(name=f"fault-{i}", served_model_name="Qwen/Qwen3-8B", port=p, seed=i)
             for i, p in enumerate(free_ports(len(CASES)))]  # fmt: skip
    with SimulatorThread(specs) as sim:
        for spec, (fault, *_) in zip(specs, CASES, strict=True):
            sim.inject(spec.name, fault)
        time.sleep(1.0)
        previous = {i: asyncio.run(_probe(spec, i))[0].scrape for i, spec in enumerate(specs)}
        time.sleep(1.5)  # a window for the rates (tokens/s) between two scrapes
        yield specs, previous


@pytest.mark.parametrize(
    ("case", "index"), [(c, i) for i, c in enumerate(CASES)], ids=[c[0]["kind"] for c in CASES]
)
def test_each_fault_is_classified_with_its_evidence_within_the_deadline(faulted, case, index):
    specs, previous = faulted
    fault, verdict, code, category = case
    probe, elapsed = asyncio.run(_probe(specs[index], index, previous[index]))
    classification = judged(probe)
    found = {f.code: f.category for f in classification.findings}
    codes = code if isinstance(code, tuple) else (code,)
    assert any(found.get(c) == category for c in codes), (fault, found)
    assert classification.verdict in (verdict if isinstance(verdict, tuple) else (verdict,)), found
    assert all(f.evidence for f in classification.findings)
    assert elapsed < DEADLINE_S + 2.0


def test_a_slow_prefill_shows_in_the_engines_ttft_between_two_scrapes():
    """The probe's own prompt is short; long prompts of real traffic show the slowdown in
    the engine's TTFT histogram, read as p95 over the window between two scrapes."""
    (port,) = free_ports(1)
    load = LoadProfile(requests_per_s=8, mean_prompt_tokens=2000, mean_output_tokens=20)
    slow = InstanceSpec(name="slow-prefill", served_model_name="Qwen/Qwen3-8B", port=port, load=load)
    with SimulatorThread([slow]) as sim:
        sim.inject(slow.name, {"kind": "slow_prefill", "factor": 40})
        first, _ = asyncio.run(_probe(slow, 99))
        time.sleep(2.5)
        second, _ = asyncio.run(_probe(slow, 99, previous=first.scrape))
    assert second.derived.get("ttft_p95_s", 0) > THRESHOLDS.ttft_p95_s
    findings = judged(second).findings
    assert "ttft_p95.high" in [f.code for f in findings]
    assert "process.hung" not in [f.category for f in findings]  # tokens still flow
