"""The shipped triage rules: they load, every rule matches its own example lines and none of its
counter-examples (the guide's grep keywords that misfire), and the ranking puts the cause above
its consequences."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.taxonomy import CATEGORIES
from diagnostics.triage import rules as triage_rules
from diagnostics.triage.engine import Matcher, triage_text

RULES = triage_rules.load()
SAMPLES = Path(__file__).parent / "data" / "samples"
MATCHER = Matcher(RULES)


def _cases(kind: str) -> list:
    return [
        pytest.param(rule, line, id=f"{rule.id}-{i}")
        for rule in RULES
        for i, line in enumerate(rule.tests.get(kind, ()))
    ]


def test_the_shipped_rules_load_and_cover_the_engines():
    assert 40 <= len(RULES) <= 100
    sources = {source for rule in RULES for source in rule.sources}
    assert {"vllm", "tgi", "ollama", "nginx_error", "nginx_access", "kernel", "docker_inspect"} <= sources
    assert "kubectl_describe" in sources


def test_every_rule_names_a_taxonomy_category():
    unknown = {rule.id: rule.category for rule in RULES if rule.category not in CATEGORIES}
    assert unknown == {}


def test_every_rule_has_example_lines_and_a_concrete_fix():
    for rule in RULES:
        assert rule.tests.get("match"), f"{rule.id} has no example line"
        assert len(rule.fix) > 30, f"{rule.id} needs a concrete fix"


@pytest.mark.parametrize(("rule", "line"), _cases("match"))
def test_a_rule_matches_its_example_line(rule, line):
    assert rule in MATCHER.rules_of(line.encode())


@pytest.mark.parametrize(("rule", "line"), _cases("no_match"))
def test_a_rule_does_not_match_its_counter_example(rule, line):
    assert rule not in MATCHER.rules_of(line.encode())


PARTNER_LINES = {
    "oom.gpu": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "cuda.xid": "NVRM: Xid (PCI:0000:06:00): 79, pid=1234, GPU has fallen off the bus.",
}


@pytest.mark.parametrize(("rule", "line"), _cases("match"))
def test_the_one_pass_scan_finds_an_example_line_among_other_lines(rule, line):
    # The scan pre-filters the whole chunk with one automaton; anchors or classes that cross a
    # newline would make it miss a line the rule matches on its own.
    text = f"INFO 06-02 11:03:18 [core.py:167] before\n{line}\nINFO 06-02 11:03:19 [core.py:167] after\n"
    if rule.when:  # a combination counts only beside a finding of its categories
        text = PARTNER_LINES[rule.when[0]] + "\n" + text
    found = {hits.rule.id for finding in triage_text(text).findings for hits in finding.rules}
    assert rule.id in found


HEALTHY_VLLM_START = (SAMPLES / "healthy_vllm_start.log").read_text(encoding="utf-8")


def test_a_healthy_vllm_start_has_no_findings():
    assert triage_text(HEALTHY_VLLM_START).findings == []


GUIDE_KEYWORD_MISFIRES = (SAMPLES / "guide_keyword_misfires.log").read_text(encoding="utf-8")


def test_the_guides_grep_keywords_that_misfire_find_nothing_here():
    assert triage_text(GUIDE_KEYWORD_MISFIRES).findings == []


OOM_KILL_THEN_TIMEOUTS = (SAMPLES / "oom_kill_then_timeouts_and_502s.log").read_text(encoding="utf-8")


def test_an_oom_kill_ranks_above_the_timeouts_and_502s_around_it():
    result = triage_text(OOM_KILL_THEN_TIMEOUTS)
    assert result.category == "oom.cpu"
    assert result.primary.severity == "fatal"
    later = [finding.category for finding in result.findings[1:]]
    assert {"process.killed", "process.not_started", "server.5xx", "timeout.ttft"} <= set(later)
    assert result.to_dict()["matches"][0]["rule"] == "kernel_oom_killer"


DOCKER_INSPECT = """\
        "State": {
            "Status": "exited",
            "Running": false,
            "OOMKilled": %s,
            "Dead": false,
            "Pid": 0,
            "ExitCode": 137,
            "Error": ""
        },
"""


def test_exit_137_without_oomkilled_is_a_kill_not_an_oom():
    result = triage_text(DOCKER_INSPECT % "false")
    assert result.category == "process.killed"
    assert not any(finding.category.startswith("oom.") for finding in result.findings)


def test_exit_137_with_oomkilled_true_is_a_container_oom():
    assert triage_text(DOCKER_INSPECT % "true").category == "oom.container"


def test_kubectl_last_state_oomkilled_is_a_container_oom_and_a_plain_error_137_is_not():
    oom = "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n"
    assert triage_text(oom).category == "oom.container"
    killed = "    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    137\n"
    assert triage_text(killed).category == "process.killed"


def test_a_dead_engine_reported_before_the_enginecores_traceback_still_ranks_the_oom_first():
    log = (
        "(APIServer pid=1) ERROR 05-05 12:36:59 [serving.py:1173] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
        "(EngineCore pid=104) Process EngineCore:\n"
        "(EngineCore pid=104) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB. "
        "GPU 0 has a total capacity of 23.56 GiB of which 56.88 MiB is free.\n"
    )
    result = triage_text(log)
    assert result.category == "oom.gpu"
    assert [finding.category for finding in result.findings] == ["oom.gpu", "process.crash"]


def test_kv_cache_preemption_is_kv_pressure_not_an_oom():
    line = (
        "WARNING 05-09 00:49:33 scheduler.py:1057 Sequence group 0 is preempted by PreemptionMode.RECOMPUTE "
        "mode because there is not enough KV cache space. total_cumulative_preemption_cnt=1\n"
    )
    result = triage_text(line)
    assert (result.category, result.primary.severity) == ("oom.kv_pressure", "warning")


def test_nginx_429s_are_a_gateway_rate_limit():
    log = (
        '2024/05/01 10:00:00 [error] 31#31: *9 limiting requests, excess: 20.500 by zone "llm_api", '
        'client: 10.0.0.7, server: llm.example.com, request: "POST /v1/chat/completions HTTP/1.1"\n'
        '10.0.0.7 - - [01/May/2024:10:00:00 +0000] "POST /v1/chat/completions HTTP/1.1" 429 169 "-" '
        '"curl/8.5.0"\n'
    )
    result = triage_text(log)
    assert result.category == "rate_limit.http_429"
    assert result.findings[0].count == 2
