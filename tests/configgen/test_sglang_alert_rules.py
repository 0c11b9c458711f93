"""The SGLang alert rules: promtool accepts every rendering, promtool's rule tests prove each
rule fires on the series SGLang exports (per DP rank, TP ranks counted once) and stays silent
when it should, the vLLM file is untouched unless SGLang is chosen, and the Alertmanager
intake files each alert under its taxonomy category."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.taxonomy import CATEGORIES
from diagnostics.configgen.alert_rules import GENERATOR, PRESETS, SGLANG_RULES
from diagnostics.configgen.base import SpecErrors
from incidents.alertmanager import category_for
from tests.configgen.test_alert_rules import expanded, run_promtool

INSTANCE = "gpu-7:30000"
# The sglang:* names SGLang's metrics collector defines (python/sglang/srt/metrics/collector.py,
# docs/sglang-operations.md), without _bucket.
SGLANG_METRICS = {
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "sglang:gen_throughput",
    "sglang:cache_hit_rate",
    "sglang:max_total_num_tokens",
    "sglang:time_to_first_token_seconds",
    "sglang:inter_token_latency_seconds",
    "sglang:e2e_request_latency_seconds",
}


def rendered(given: dict[str, str] | None = None, *, preset: str = "") -> dict[str, str]:
    return {f.name: f.content for f in GENERATOR.render(GENERATOR.spec(given or {}, preset=preset))}


def sglang_text(given: dict[str, str] | None = None, *, preset: str = "") -> str:
    return rendered({"engine": "sglang", **(given or {})}, preset=preset)["sglang-alerts.yml"]


def alerts_by_name(text: str) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]}


def assert_promtool_accepts(tmp_path: Path, text: str) -> None:
    path = tmp_path / "sglang-alerts.yml"
    path.write_text(text)
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr + text


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_renders_sglang_rules_that_promtool_accepts(tmp_path, preset):
    assert_promtool_accepts(tmp_path, sglang_text(preset=preset))


@pytest.mark.parametrize(
    "given",
    [
        {"sglang_job": "llm/sglang-prod", "sglang_down_for": "30s", "sglang_kv_threshold": "1"},
        {"sglang_queue_threshold": "1000000", "sglang_queue_for": "45", "sglang_kv_min_queue": "0"},
        {"sglang_ttft_threshold": "0.25", "sglang_ttft_for": "0", "sglang_stall_for": "2h"},
    ],
    ids=["job", "queue", "ttft"],
)
def test_edited_values_render_rules_that_promtool_accepts(tmp_path, given):
    assert_promtool_accepts(tmp_path, sglang_text(given))


def test_the_engine_choice_picks_the_files():
    assert list(rendered()) == ["vllm-alerts.yml"]
    assert "sglang" not in rendered()["vllm-alerts.yml"].lower()
    assert list(rendered({"engine": "sglang"})) == ["sglang-alerts.yml"]
    both = rendered({"engine": "both"})
    assert list(both) == ["vllm-alerts.yml", "sglang-alerts.yml"]
    assert both["vllm-alerts.yml"] == rendered()["vllm-alerts.yml"]  # the vLLM file is the same bytes


def test_the_sglang_rules_are_grouped_critical_and_warning():
    groups = yaml.safe_load(sglang_text())["groups"]
    assert [(g["name"], [r["alert"] for r in g["rules"]]) for g in groups] == [
        ("sglang_critical", ["SGLangServiceDown", "SGLangGenerationStalled"]),
        ("sglang_warning", ["SGLangKVCacheNearFull", "SGLangQueueBacklog", "SGLangHighTTFT"]),
    ]


def test_every_sglang_metric_a_rule_queries_is_one_sglang_exports():
    for rule in alerts_by_name(sglang_text()).values():
        for name in re.findall(r"sglang:[a-z0-9_]+", rule["expr"]):
            assert name.removesuffix("_bucket") in SGLANG_METRICS, name
        assert "vllm:" not in rule["expr"]


def test_each_alert_carries_a_taxonomy_category_the_alertmanager_intake_uses():
    for rule in alerts_by_name(sglang_text()).values():
        category = rule["labels"]["category"]
        assert category in CATEGORIES
        assert category_for(labels={"alertname": rule["alert"], **rule["labels"]}) == category
    assert {r.alert for r in SGLANG_RULES} == set(alerts_by_name(sglang_text()))


def test_ttft_is_the_p95_of_sglangs_histogram():
    expr = alerts_by_name(sglang_text({"sglang_ttft_threshold": "3"}))["SGLangHighTTFT"]["expr"]
    assert expr.startswith(
        "histogram_quantile(0.95, sum by (le, instance) (rate(sglang:time_to_first_token_seconds_bucket"
    )
    assert expr.endswith("> 3")


# What promtool's rule tests feed the rules: SGLang's labels (model_name, tp_rank, dp_rank).
def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    labels = {"job": "sglang", "instance": INSTANCE, "model_name": "qwen", "tp_rank": "0", **labels}
    return {"series": name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


# Prometheus's own series: only the target's labels.
UP_DOWN = {"series": f'up{{job="sglang",instance="{INSTANCE}"}}', "values": "0x5"}
TTFT_BUCKETS = [
    _series("sglang:time_to_first_token_seconds_bucket", values, le=le)
    for le, values in (("1", "0x15"), ("4", "0x15"), ("8", "0+10x15"), ("+Inf", "0+10x15"))
]
FIRING = {
    # name: (series, eval time, alert, labels of the firing alert, $value as humanized)
    "down": ([UP_DOWN], "3m", "SGLangServiceDown", {"instance": INSTANCE, "job": "sglang"}, "0"),
    "stalled with requests running": (
        [_series("sglang:gen_throughput", "0x10"), _series("sglang:num_running_reqs", "12x10")],
        "5m",
        "SGLangGenerationStalled",
        {"instance": INSTANCE},
        "12",
    ),
    "kv near full with a queue": (
        [_series("sglang:token_usage", "0.98x10"), _series("sglang:num_queue_reqs", "12x10")],
        "5m",
        "SGLangKVCacheNearFull",
        {"instance": INSTANCE},
        "98%",
    ),
    "queue summed over two DP ranks": (
        [
            _series("sglang:num_queue_reqs", "30x10", dp_rank="0"),
            _series("sglang:num_queue_reqs", "30x10", dp_rank="1"),
        ],
        "5m",
        "SGLangQueueBacklog",
        {"instance": INSTANCE},
        "60",
    ),
    "ttft p95": (TTFT_BUCKETS, "10m", "SGLangHighTTFT", {"instance": INSTANCE}, "7.8"),
}
SILENT = {
    "up": (
        [{"series": f'up{{job="sglang",instance="{INSTANCE}"}}', "values": "1x5"}],
        "3m",
        "SGLangServiceDown",
    ),
    "generating": (
        [_series("sglang:gen_throughput", "800x10"), _series("sglang:num_running_reqs", "12x10")],
        "5m",
        "SGLangGenerationStalled",
    ),
    "idle": (
        [_series("sglang:gen_throughput", "0x10"), _series("sglang:num_running_reqs", "0x10")],
        "5m",
        "SGLangGenerationStalled",
    ),
    "kv full without a queue": (
        [_series("sglang:token_usage", "0.99x10"), _series("sglang:num_queue_reqs", "0x10")],
        "5m",
        "SGLangKVCacheNearFull",
    ),
    "kv at good utilization with a queue": (
        [_series("sglang:token_usage", "0.92x10"), _series("sglang:num_queue_reqs", "40x10")],
        "5m",
        "SGLangKVCacheNearFull",
    ),
    # every TP rank reports the same queue with --enable-metrics-for-all-schedulers: counted once
    "one queue seen by two TP ranks": (
        [
            _series("sglang:num_queue_reqs", "30x10", tp_rank="0"),
            _series("sglang:num_queue_reqs", "30x10", tp_rank="1"),
        ],
        "5m",
        "SGLangQueueBacklog",
    ),
    "queue for less than its for": ([_series("sglang:num_queue_reqs", "80x10")], "2m", "SGLangQueueBacklog"),
}


def promtool_test(tmp_path: Path, series, eval_time: str, alert: str, expected) -> None:
    (tmp_path / "sglang-alerts.yml").write_text(sglang_text())
    test = {
        "rule_files": ["sglang-alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [{"eval_time": eval_time, "alertname": alert, "exp_alerts": expected}],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    result = run_promtool("test", "rules", str(tmp_path / "test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("case", FIRING)
def test_promtool_rule_tests_prove_each_sglang_alert_fires_on_its_series(tmp_path, case):
    series, eval_time, alert, labels, value = FIRING[case]
    rule = alerts_by_name(sglang_text())[alert]
    annotations = {key: expanded(text, labels, value) for key, text in rule["annotations"].items()}
    expected = [{"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": annotations}]
    promtool_test(tmp_path, series, eval_time, alert, expected)


@pytest.mark.parametrize("case", SILENT)
def test_promtool_rule_tests_prove_the_sglang_alert_stays_silent(tmp_path, case):
    series, eval_time, alert = SILENT[case]
    promtool_test(tmp_path, series, eval_time, alert, [])


def titles(given: dict[str, str], severity: str) -> list[str]:
    return [c.title for c in GENERATOR.checks(GENERATOR.spec(given)) if c.severity == severity]


def test_the_sglang_defaults_raise_no_warning_and_say_what_they_read():
    assert titles({"engine": "sglang"}, "warning") == []
    assert any("`sglang:`" in t for t in titles({"engine": "sglang"}, "ok"))
    assert not any("vllm" in t.lower() for t in titles({"engine": "sglang"}, "ok"))


def test_it_warns_about_a_shared_job_a_low_kv_threshold_and_a_short_for():
    found = titles(
        {"engine": "both", "sglang_job": "vllm", "sglang_kv_threshold": "0.8", "sglang_down_for": "10s"},
        "warning",
    )
    assert any("share the job vllm" in t for t in found)
    assert any("good utilization" in t for t in found)
    assert any("SGLangServiceDown" in t and "two scrapes" in t for t in found)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sglang_kv_threshold", "1.5"),
        ("sglang_queue_threshold", "-1"),
        ("sglang_ttft_for", "soon"),
        ("sglang_job", ""),
        ("engine", "tgi"),
        ("sglang_kv_min_queue", "x"),
    ],
)
def test_out_of_range_and_malformed_sglang_values_are_refused(field, value):
    with pytest.raises(SpecErrors) as caught:
        GENERATOR.spec({field: value})
    assert field in caught.value.errors
