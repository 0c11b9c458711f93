# ruff: noqa: E501  (the tables of cases read best one per line)
"""A scenario's expect block: mistakes name their field; the checker holds expectations
against hand-made verdict timelines and incidents and says plainly what was not met."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from fleet.simulator.scenarios import ScenarioError, parse_scenario
from incidents.drills.checks import check, unmet
from incidents.drills.observed import AppliedFault, Entry, IncidentSeen, Observation, _reopened_by_other

BASE = {
    "name": "tiny",
    "time_scale": 10,
    "clock_start": "00:00",
    "instances": [{"name": "gpu-a"}, {"name": "gpu-b"}],
    "timeline": [{"at": "00:01:00", "instance": "gpu-a", "fault": {"kind": "crash"}}],
}


def scenario_with(expect: dict, **changes):
    data = yaml.safe_load(yaml.safe_dump(BASE)) | changes
    return parse_scenario(data | {"expect": expect})


def obs(at_s: float, verdict: str, *categories: str, instance: str = "gpu-a") -> Observation:
    return Observation(at_s=at_s, instance=instance, verdict=verdict, categories=tuple(categories))


def incident(category: str, *instances: str, host: bool = False, opened: float = 200, fired: int = 1):
    return IncidentSeen(
        category=category, title="t", instances=instances, host=host, status="open",
        opened_at_s=opened, fired=fired, reopened_by_other_fault=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("expect", "message"),
    [
        ({"instances": {"gpu-c": [{"by": 60, "verdict": "up"}]}}, "expect.instances.gpu-c: no instance named"),
        ({"instances": {"gpu-a": [{"verdict": "up"}]}}, "expect.instances.gpu-a[0].by: is required"),
        ({"instances": {"gpu-a": [{"by": 60, "verdict": "sad"}]}}, "expect.instances.gpu-a[0].verdict: expected one of"),
        ({"instances": {"gpu-a": [{"by": 60, "finding": "oom.oops"}]}}, "gpu-a[0].finding: unknown category 'oom.oops'"),
        ({"instances": {"gpu-a": [{"by": "25:00", "verdict": "up"}]}}, "gpu-a[0].by: '25:00' is not a time of day"),
        ({"instances": {"gpu-a": [{"by": 60}]}}, "gpu-a[0]: needs verdict, finding or no_finding"),
        ({"incidents": {"count": -1}}, "expect.incidents.count: expected an integer >= 0"),
        ({"incidents": {"count": {"min": 3, "max": 1}}}, "expect.incidents.count: min 3 is above max 1"),
        ({"incidents": {"items": [{"instances": ["gpu-a"]}]}}, "expect.incidents.items[0].category: is required"),
        ({"incidents": {"items": [{"category": "cuda.xid", "instances": ["x"]}]}}, "items[0].instances: no instance named 'x'"),
        ({"incidents": {"items": [{"category": "cuda.xid", "instances": ["gpu-a"], "host": "yes"}]}}, "items[0].host: expected true or false"),
        ({"incidents": {"flaps": 3}}, "expect.incidents.flaps: unknown field"),
        ({"incidents": {"reopened_by_other_fault": "no"}}, "reopened_by_other_fault: expected true or false"),
    ],
)  # fmt: skip
def test_a_bad_expectation_names_its_field(expect, message):
    with pytest.raises(ScenarioError) as raised:
        scenario_with(expect)
    assert message in str(raised.value)


def test_the_probe_interval_must_be_positive_and_defaults_to_thirty_seconds():
    assert scenario_with({}).probe_interval_s == 30
    with pytest.raises(ScenarioError, match="probe_interval_s: must be a number > 0"):
        scenario_with({}, probe_interval_s=0)


def test_instances_naming_the_same_gpu_host_share_it():
    scenario = scenario_with(
        {}, instances=[{"name": "gpu-a", "gpu_host": "node-1"}, {"name": "gpu-b", "gpu_host": "node-1"}]
    )
    assert scenario.host_of("gpu-a") == scenario.host_of("gpu-b") == "node-1"
    assert scenario_with({}).host_of("gpu-a") == "gpu-a"  # one host per instance otherwise


def test_a_drill_runs_until_its_last_expectation():
    scenario = scenario_with({"instances": {"gpu-a": [{"by": "00:03:00", "verdict": "down"}]}})
    assert scenario.drill_end_s == 180 and scenario.clock_label(180) == "00:03:00"


def test_an_instance_is_judged_by_its_state_at_the_given_time():
    scenario = scenario_with(
        {"instances": {"gpu-a": [{"by": "00:01:30", "verdict": "down", "finding": "process.not_started"}]}}
    )
    timeline = [
        obs(30, "up"),
        obs(75, "failing", "process.not_started"),
        obs(95, "down", "process.not_started"),
    ]
    results = check(expect=scenario.expect, observations=timeline, incidents=[])
    assert unmet(results) == ["gpu-a: at 00:01:30 expected verdict down, saw failing (process.not_started)"]
    assert unmet(check(expect=scenario.expect, observations=timeline[:1] + timeline[2:], incidents=[])) == [
        "gpu-a: at 00:01:30 expected verdict down, saw up"
    ]


def test_a_list_of_verdicts_accepts_any_of_them_and_no_finding_means_never_until_then():
    scenario = scenario_with(
        {
            "instances": {
                "gpu-a": [{"by": 120, "verdict": ["degraded", "failing"], "no_finding": "process.hung"}]
            }
        }
    )
    fine = [obs(60, "degraded", "timeout.ttft")]
    assert unmet(check(expect=scenario.expect, observations=fine, incidents=[])) == []
    hung_once = [obs(30, "failing", "process.hung"), *fine]
    (message,) = unmet(check(expect=scenario.expect, observations=hung_once, incidents=[]))
    assert message.startswith("gpu-a: at 120 expected never process.hung, saw it at 30 s")


def test_incidents_are_counted_matched_by_category_and_instances_and_kept_off_quiet_instances():
    expect = scenario_with(
        {
            "incidents": {
                "count": 1,
                "items": [{"category": "process.not_started", "instances": ["gpu-a", "gpu-b"], "host": True}],
                "none_for": ["gpu-b"],
            }
        }
    ).expect
    host_incident = incident("process.not_started", "gpu-a", "gpu-b", host=True)
    assert unmet(check(expect=expect, observations=[], incidents=[host_incident])) == [
        "gpu-b: expected no incident, saw process.not_started"
    ]
    two = [incident("process.not_started", "gpu-a"), incident("process.not_started", "gpu-b")]
    assert unmet(check(expect=expect, observations=[], incidents=two)) == [
        "incidents: expected 1 incident(s), saw 2 (process.not_started on gpu-a; process.not_started on gpu-b)",
        "incidents: expected a host incident process.not_started grouping gpu-a, gpu-b, saw "
        "process.not_started on gpu-a; process.not_started on gpu-b",
        "gpu-b: expected no incident, saw process.not_started",
    ]


def test_an_incident_must_open_within_its_budget_and_fire_with_each_flap():
    expect = scenario_with(
        {
            "incidents": {
                "items": [{"category": "cuda.xid", "instances": ["gpu-a"], "by": "00:04:00", "min_fired": 3}]
            }
        }
    ).expect
    assert unmet(
        check(expect=expect, observations=[], incidents=[incident("cuda.xid", "gpu-a", opened=300)])
    ) == [
        "incidents: expected an incident cuda.xid grouping gpu-a by 00:04:00, fired at least 3 times, opened at 300 s"
    ]
    assert unmet(
        check(expect=expect, observations=[], incidents=[incident("cuda.xid", "gpu-a", fired=2)])
    ) == [
        "incidents: expected an incident cuda.xid grouping gpu-a by 00:04:00, fired at least 3 times, "
        "it fired 2 time(s)"
    ]


def test_an_incident_fired_again_by_a_different_fault_after_clearing_counts_as_reopened():
    faults = [
        AppliedFault(at_s=30, instance="a", kind="crash"),
        AppliedFault(at_s=300, instance="a", kind="http_500"),
    ]
    opened = Entry(at_s=120, kind="opened", text="", instance="a")
    cleared = Entry(at_s=250, kind="alert_resolved", text="")
    same_fault_again = Entry(at_s=280, kind="alert_fired", text="", instance="a")
    other_fault = Entry(at_s=400, kind="alert_fired", text="", instance="a")
    assert not _reopened_by_other([opened, cleared, same_fault_again], faults)
    assert _reopened_by_other([opened, cleared, other_fault], faults)


def test_the_command_names_an_unknown_scenario_or_a_broken_file(tmp_path):
    with pytest.raises(CommandError, match="no-such-drill.yaml"):
        call_command("drill", "no-such-drill")
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(BASE | {"expect": {"incidents": {"count": "two"}}}))
    with pytest.raises(CommandError, match=r"broken.yaml: expect.incidents.count: expected an integer"):
        call_command("drill", str(broken))
