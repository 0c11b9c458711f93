"""A sleeping engine, over real sockets: the simulator's engine_asleep fault (vLLM after POST
/sleep?level=N: vllm:engine_sleep_state says so, /health stays 200, requests wait
unanswered) is probed the way the scheduled cycle does and judged asleep, not down, with no
page; the same engine stalled while awake is down (hung behind a healthy /health)."""

from __future__ import annotations

import asyncio
import time

import pytest

from fleet.probes.classify import Thresholds, next_state
from fleet.probes.fetch import make_instance_client
from fleet.probes.instance_probe import probe_instance
from fleet.probes.judgement import judge
from fleet.probes.target import ProbeLimits, ProbeTarget
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.spec import InstanceSpec, LoadProfile
from tests.fleet.probing import free_ports

LIMITS = ProbeLimits(connect_timeout_s=1, read_timeout_s=2, total_deadline_s=4, stream_deadline_s=4)
THRESHOLDS = Thresholds(ttfb_s=1.0)
VERSION = "0.11.2"  # engine_sleep_state from 0.11.1
CASES = [({"kind": "engine_asleep", "level": 1}, 1), ({"kind": "engine_asleep", "level": 2}, 2)]


def _target(spec: InstanceSpec, index: int) -> ProbeTarget:
    return ProbeTarget(
        instance_id=index, name=spec.name, engine="vllm", engine_version=spec.version,
        base_url=f"http://127.0.0.1:{spec.port}", served_model_name=spec.served_model_name,
        api_key=None, max_num_seqs=spec.max_num_seqs, max_model_len=spec.max_model_len,
    )  # fmt: skip


async def _probe(spec: InstanceSpec, index: int, previous=None):
    async with make_instance_client(limits=LIMITS) as client:
        return await probe_instance(
            client=client, target=_target(spec, index), previous_scrape=previous, limits=LIMITS
        )


@pytest.fixture(scope="module")
def asleep():
    load = LoadProfile(requests_per_s=4, mean_prompt_tokens=200, mean_output_tokens=40)
    specs = [
        InstanceSpec(name=f"asleep-{i}", served_model_name="Qwen/Qwen3-8B", port=port, seed=i,
                     version=VERSION, load=load)
        for i, port in enumerate(free_ports(len(CASES)))
    ]  # fmt: skip
    with SimulatorThread(specs) as sim:
        for spec, (fault, _) in zip(specs, CASES, strict=True):
            sim.inject(spec.name, fault)
        time.sleep(1.0)
        first = [asyncio.run(_probe(spec, i)) for i, spec in enumerate(specs)]
        time.sleep(1.5)  # a window for the rates between two scrapes
        second = [asyncio.run(_probe(spec, i, first[i].scrape)) for i, spec in enumerate(specs)]
        yield second


@pytest.mark.parametrize(("case", "index"), [(c, i) for i, c in enumerate(CASES)], ids=["level1", "level2"])
def test_a_sleeping_engine_is_judged_asleep_not_down(asleep, case, index):
    _, level = case
    probe = asleep[index]
    assert probe.derived.get("engine_sleep_level") == float(level), probe.derived
    classification = judge(target=probe.target, parts=probe.parts, thresholds=THRESHOLDS).classification
    found = {f.code: f for f in classification.findings}
    assert classification.verdict == "up", [(f.code, f.severity, f.evidence) for f in classification.findings]
    assert found["engine.asleep"].evidence.startswith(f"Asleep (level {level}")
    assert "engine.hung" not in found
    assert all(f.severity == "info" for f in classification.findings)
    step = next_state(previous_state="up", failures={}, classification=classification, thresholds=THRESHOLDS)
    assert step.verdict == "up" and not step.failures
