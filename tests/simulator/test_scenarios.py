"""Scenario files: the shipped replays load, mistakes name their field, the player applies them."""

from __future__ import annotations

import httpx
import pytest
import yaml

from fleet.simulator.scenarios import ScenarioError, load_scenario, parse_scenario, shipped_scenarios
from tests.simulator.conftest import wait_for

MINIMAL = {
    "name": "tiny",
    "clock_start": "02:50",
    "instances": [{"name": "a", "version": "0.7.3"}],
    "timeline": [{"at": "02:55", "fault": {"kind": "tps_drop", "factor": 2}}],
}


def _with(**changes) -> dict:
    data = yaml.safe_load(yaml.safe_dump(MINIMAL))
    data.update(changes)
    return data


def test_both_guide_scenarios_ship_and_load():
    names = {path.name for path in shipped_scenarios()}
    assert {"guide-0300-long-prompt-kv-exhaustion.yaml", "guide-1400-batch-surge-two-ips.yaml"} <= names
    for path in shipped_scenarios():
        scenario = load_scenario(path)
        assert scenario.instances and scenario.timeline and scenario.time_scale > 1


def test_the_0300_case_fills_kv_with_long_prompts_then_a_separate_exit_137():
    scenario = load_scenario("guide-0300-long-prompt-kv-exhaustion.yaml")
    (server,) = scenario.instances
    assert (server.version, server.gpu_model, server.max_model_len) == ("0.7.3", "a100-80gb", 32768)
    long_docs, crash = scenario.timeline
    assert long_docs.at_s == 300 and long_docs.load.mean_prompt_tokens > 28000
    assert crash.label == "02:58:32" and crash.at_s == 512
    assert crash.fault == {"kind": "crash", "exit_code": 137, "oom_killed": True}
    assert scenario.real_seconds(crash.at_s) == pytest.approx(512 / 6)


def test_the_1400_case_surges_from_two_client_ips_for_thirty_minutes():
    scenario = load_scenario("guide-1400-batch-surge-two-ips.yaml")
    start, end = scenario.timeline
    assert start.load.clients == ("10.0.2.55", "10.0.2.56") and start.load.timeout_s
    assert start.load.requests_per_s > 4 * scenario.instances[0].load.requests_per_s
    assert (end.at_s - start.at_s, end.load.requests_per_s) == (1800, 0)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            _with(timeline=[{"at": "02:55", "fault": {"kind": "oom"}}]),
            "timeline[0].fault.kind: unknown fault kind 'oom'",
        ),
        (
            _with(timeline=[{"at": 5, "fault": {"kind": "tps_drop", "factor": 0}}]),
            "timeline[0].fault.factor: factor must",
        ),
        (
            _with(instances=[{"name": "a", "engine": "lmdeploy"}]),
            "instances[0].engine: must be one of vllm, tgi, ollama, sglang",
        ),
        (
            _with(instances=[{"name": "a", "max_model_len": "big"}]),
            "instances[0].max_model_len: expected an integer",
        ),
        (_with(instances=[{"name": "a", "load": {"rps": 3}}]), "instances[0].load.rps: unknown field"),
        (_with(clock_start=None), "timeline[0].at: a clock time needs clock_start"),
        (
            _with(timeline=[{"at": 1, "instance": "b", "clear_faults": True}]),
            "timeline[0]: no instance named 'b'",
        ),
        (
            _with(timeline=[{"at": 1, "load": {}, "clear_faults": True}]),
            "timeline[0]: needs exactly one of load",
        ),
        (
            _with(timeline=[{"at": "25:00", "clear_faults": True}]),
            "timeline[0].at: '25:00' is not a time of day",
        ),
        (_with(time_scale=0), "time_scale: must be a number > 0"),
        (_with(speed=2), "speed: unknown field"),
        ({"instances": []}, "name: is required"),
    ],
)
def test_a_bad_scenario_names_the_field_at_fault(data, message):
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(data)
    assert message in str(raised.value)


def test_a_bad_file_names_itself(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ninstances: [{name: a, port: 99999}]\n")
    with pytest.raises(ScenarioError, match=r"broken.yaml: instances\[0\].port: must be between 0 and 65535"):
        load_scenario(path)
    with pytest.raises(ScenarioError, match="not valid YAML"):
        path.write_text("name: [unclosed\n")
        load_scenario(path)


def test_the_player_applies_the_timeline_in_compressed_time(simulate):
    scenario = parse_scenario(
        {
            "name": "quick",
            "time_scale": 100,
            "instances": [{"name": "a"}],
            "timeline": [
                {"at": 10, "load": {"stream": "surge", "requests_per_s": 20, "clients": ["10.0.2.55"]}},
                {"at": 20, "fault": {"kind": "gpu_xid", "duration_s": 3000}},
                {"at": 40, "fault": {"kind": "slow_headers", "delay_s": 0.01}},
                {"at": 50, "clear_faults": "slow_headers"},
            ],
        }
    )
    sim = simulate(*scenario.instances, scenario=scenario)

    def kinds() -> list[str]:
        return [f["kind"] for f in sim.state("a")["faults"]]

    wait_for(lambda: kinds() == ["gpu_xid", "slow_headers"], timeout_s=3, what="both faults")
    wait_for(lambda: kinds() == ["gpu_xid"], timeout_s=3, what="the clear")
    assert [stream["stream"] for stream in sim.state("a")["load"]] == ["surge"]
    fault = sim.state("a")["faults"][0]
    assert 20 < fault["remaining_s"] <= 30  # 3000 scenario seconds at time_scale 100
    assert httpx.get(sim.url("a") + "/_sim/nvml").json()["gpus"][0]["xid_errors"] == [79]
