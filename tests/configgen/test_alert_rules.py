"""The Prometheus alert rules generator: promtool accepts every rendering, promtool's own rule
tests prove the expressions fire on the series they are meant for, the metric names follow the
vLLM version, and no field lets a value change the YAML or the PromQL."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from diagnostics.configgen.alert_rules import GENERATOR, PRESETS, prometheus_duration
from diagnostics.configgen.base import SpecErrors
from diagnostics.configgen.vllm_metric_names import VERSIONS, metrics_for

V1_VERSIONS = [v for v in VERSIONS if v != "0.7"]
PAYLOADS = ["5\n  - alert: Evil", "2m; rm -rf /", "{{ $x }}", 'a"b', "$(id)"]
INSTANCE = "gpu-1:8000"


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus (make test does)"
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60)


def rules_text(given: dict[str, str] | None = None, *, preset: str = "") -> str:
    spec = GENERATOR.spec(given or {}, preset=preset)
    (config,) = GENERATOR.render(spec)
    assert config.name == "vllm-alerts.yml"
    return config.content


def assert_promtool_accepts(tmp_path: Path, text: str) -> None:
    path = tmp_path / "vllm-alerts.yml"
    path.write_text(text)
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr + text


def alerts_by_name(text: str) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]}


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("version", VERSIONS)
def test_every_preset_renders_rules_that_promtool_accepts(tmp_path, preset, version):
    assert_promtool_accepts(tmp_path, rules_text({"vllm_version": version}, preset=preset))


EDITED = [
    {
        "vllm_version": "0.7",
        "kv_threshold": "0.9",
        "kv_for": "90s",
        "swap_threshold": "0.1",
        "swap_for": "1h",
    },
    {
        "vllm_version": "0.8",
        "job": "kubernetes-pods",
        "error_rate_threshold": "0.5",
        "error_rate_for": "500ms",
    },
    {
        "vllm_version": "0.9",
        "ttft_threshold": "0.25",
        "ttft_for": "0",
        "e2e_threshold": "120",
        "e2e_for": "2h",
    },
    {"vllm_version": "0.12", "queue_threshold": "1000000", "queue_for": "45", "kv_min_waiting": "10"},
    {"vllm_version": "0.20", "gpu_temp_metric": "nvidia_smi_temperature_gpu", "gpu_temp_threshold": "85.5"},
    {"vllm_version": "0.30", "job": "llm/vllm-prod", "down_for": "30s", "kv_threshold": "1", "kv_for": "1.5"},
]


@pytest.mark.parametrize("given", EDITED, ids=lambda given: given["vllm_version"])
def test_edited_values_render_rules_that_promtool_accepts(tmp_path, given):
    assert_promtool_accepts(tmp_path, rules_text(given))


def test_the_rules_are_grouped_critical_and_warning_in_the_guides_order():
    groups = yaml.safe_load(rules_text({"vllm_version": "0.7"}))["groups"]
    assert [(g["name"], [r["alert"] for r in g["rules"]]) for g in groups] == [
        ("vllm_critical", ["VLLMKVCacheNearFull", "VLLMServiceDown", "VLLMHighErrorRate"]),
        (
            "vllm_warning",
            ["VLLMHighTTFT", "VLLMQueueBacklog", "GPUTemperatureHigh", "VLLMKVCacheSwap", "VLLMHighLatency"],
        ),
    ]


def test_edited_thresholds_and_durations_reach_the_rules():
    alerts = alerts_by_name(rules_text({"kv_threshold": "0.97", "kv_for": "90s", "queue_threshold": "20",
                                        "queue_for": "1h", "down_for": "120"}))  # fmt: skip
    assert "> 0.97 and on (instance)" in alerts["VLLMKVCacheNearFull"]["expr"]
    assert alerts["VLLMKVCacheNearFull"]["for"] == "90s"
    assert alerts["VLLMQueueBacklog"]["expr"].endswith("> 20")
    assert alerts["VLLMQueueBacklog"]["for"] == "1h"
    assert alerts["VLLMServiceDown"]["for"] == "2m"


@pytest.mark.parametrize(
    ("seconds", "expected"), [(120, "2m"), (90, "90s"), (3600, "1h"), (0.5, "500ms"), (0, "0s")]
)
def test_durations_are_written_in_prometheus_form(seconds, expected):
    assert prometheus_duration(seconds) == expected


# What promtool's rule tests feed the rules, and what must (or must not) fire.
def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    labels = {"job": "vllm", "instance": INSTANCE, **labels}
    return {"series": name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


def _kv_series(kv_metric: str, waiting: int) -> list[dict[str, str]]:
    return [_series(kv_metric, "0.99x10"), _series("vllm:num_requests_waiting", f"{waiting}x10")]


TTFT_BUCKETS = [
    _series("vllm:time_to_first_token_seconds_bucket", values, le=le)
    for le, values in (("1", "0x15"), ("5", "0x15"), ("10", "0+10x15"), ("+Inf", "0+10x15"))
]
FINISHED = [
    _series("vllm:request_success_total", "0+90x15", finished_reason="stop"),
    _series("vllm:request_success_total", "0+10x15", finished_reason="abort"),
]
FIRING_CASES = {
    # name: (version, series, eval time, alert, labels of the firing alert, $value as humanized)
    "kv near full with waiting requests": ("0.11", _kv_series("vllm:kv_cache_usage_perc", 12), "5m",
                                           "VLLMKVCacheNearFull", {"instance": INSTANCE}, "99%"),
    "kv near full on 0.7": ("0.7", _kv_series("vllm:gpu_cache_usage_perc", 12), "5m", "VLLMKVCacheNearFull",
                            {"instance": INSTANCE}, "99%"),
    # the console's one KV rule: usage high AND (requests waiting OR preempted)
    "kv near full with preemptions and nothing waiting": (
        "0.11",
        [*_kv_series("vllm:kv_cache_usage_perc", 0), _series("vllm:num_preemptions_total", "0+30x10")],
        "5m", "VLLMKVCacheNearFull", {"instance": INSTANCE}, "99%"),
    "service down": ("0.11", [_series("up", "0x5")], "3m", "VLLMServiceDown",
                     {"instance": INSTANCE, "job": "vllm"}, "0"),
    "error rate": ("0.11", FINISHED, "10m", "VLLMHighErrorRate", {"instance": INSTANCE}, "10%"),
    "ttft p99": ("0.12", TTFT_BUCKETS, "10m", "VLLMHighTTFT", {"instance": INSTANCE}, "9.95"),
    "queue backlog": ("0.20", [_series("vllm:num_requests_waiting", "60x10")], "5m", "VLLMQueueBacklog",
                      {"instance": INSTANCE}, "60"),
    # where the engine splits its waits (0.20+), only those waiting for capacity count
    "queue backlog waiting for capacity": (
        "0.20",
        [_series("vllm:num_requests_waiting", "65x10"),
         _series("vllm:num_requests_waiting_by_reason", "60x10", reason="capacity"),
         _series("vllm:num_requests_waiting_by_reason", "5x10", reason="deferred")],
        "5m", "VLLMQueueBacklog", {"instance": INSTANCE}, "60"),
    "gpu temperature": ("0.11", [_series("DCGM_FI_DEV_GPU_TEMP", "88x10", job="dcgm", gpu="3")], "6m",
                        "GPUTemperatureHigh", {"instance": INSTANCE, "job": "dcgm", "gpu": "3"}, "88"),
    "kv swap on 0.7": ("0.7", [_series("vllm:cpu_cache_usage_perc", "0.2x10")], "6m", "VLLMKVCacheSwap",
                       {"instance": INSTANCE}, "20%"),
}  # fmt: skip
SILENT_CASES = {
    # name: (version, series, eval time, alert that must stay silent)
    "kv near full without waiting requests": ("0.11", _kv_series("vllm:kv_cache_usage_perc", 0), "5m",
                                              "VLLMKVCacheNearFull"),
    "kv near full, a request or two waiting between steps": (
        "0.11", _kv_series("vllm:kv_cache_usage_perc", 2), "5m", "VLLMKVCacheNearFull"),
    "kv near full, nothing waiting, preemptions flat": (
        "0.11", [*_kv_series("vllm:kv_cache_usage_perc", 0), _series("vllm:num_preemptions_total", "7x10")],
        "5m", "VLLMKVCacheNearFull"),
    "kv near full for less than its for": ("0.11", _kv_series("vllm:kv_cache_usage_perc", 12), "1m",
                                           "VLLMKVCacheNearFull"),
    "service up": ("0.11", [_series("up", "1x5")], "3m", "VLLMServiceDown"),
    "requests deferred for a LoRA slot or a KV transfer are no backlog": (
        "0.20",
        [_series("vllm:num_requests_waiting", "80x10"),
         _series("vllm:num_requests_waiting_by_reason", "10x10", reason="capacity"),
         _series("vllm:num_requests_waiting_by_reason", "70x10", reason="deferred")],
        "5m", "VLLMQueueBacklog"),
    "no errors": ("0.11", FINISHED[:1], "10m", "VLLMHighErrorRate"),
}  # fmt: skip


def expanded(template: str, labels: dict[str, str], value: str) -> str:
    """The annotation Prometheus writes for these labels and this humanized $value."""
    text = template
    for placeholder in ("{{ $value | humanizePercentage }}", "{{ $value | humanize }}"):
        text = text.replace(placeholder, value)
    for name, label_value in labels.items():
        text = text.replace("{{ $labels." + name + " }}", label_value)
    assert "{{" not in text, f"an annotation template the test does not know: {text}"
    return text


def promtool_test(tmp_path: Path, version: str, series: list[dict[str, str]], eval_time: str, alert: str,
                  expected: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:  # fmt: skip
    (tmp_path / "vllm-alerts.yml").write_text(rules_text({"vllm_version": version}))
    alert_test = {"eval_time": eval_time, "alertname": alert, "exp_alerts": expected}
    test = {
        "rule_files": ["vllm-alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [alert_test]}],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    return run_promtool("test", "rules", str(tmp_path / "test.yml"))


@pytest.mark.parametrize("case", FIRING_CASES)
def test_promtool_rule_tests_prove_each_alert_fires_on_its_series(tmp_path, case):
    version, series, eval_time, alert, labels, value = FIRING_CASES[case]
    rule = alerts_by_name(rules_text({"vllm_version": version}))[alert]
    annotations = {key: expanded(text, labels, value) for key, text in rule["annotations"].items()}
    expected = [
        {"exp_labels": {**labels, "severity": rule["labels"]["severity"]}, "exp_annotations": annotations}
    ]
    result = promtool_test(tmp_path, version, series, eval_time, alert, expected)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("case", SILENT_CASES)
def test_promtool_rule_tests_prove_the_alert_stays_silent_when_it_should(tmp_path, case):
    version, series, eval_time, alert = SILENT_CASES[case]
    result = promtool_test(tmp_path, version, series, eval_time, alert, [])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("version", V1_VERSIONS)
def test_v1_versions_never_mention_the_swap_gauge_nor_request_failure_total(version):
    text = rules_text({"vllm_version": version})
    assert "cpu_cache_usage_perc" not in text
    assert "request_failure_total" not in text
    assert "VLLMKVCacheSwap" not in text


@pytest.mark.parametrize("version", VERSIONS)
def test_every_vllm_metric_a_rule_queries_is_one_the_version_exposes(version):
    exposed = metrics_for(version).exposed
    for rule in alerts_by_name(rules_text({"vllm_version": version})).values():
        for name in re.findall(r"vllm:[a-z0-9_]+", rule["expr"]):
            assert name.removesuffix("_bucket") in exposed, f"{version} does not expose {name}"


def test_0_7_uses_gpu_cache_usage_perc_and_includes_the_swap_rule():
    alerts = alerts_by_name(rules_text({"vllm_version": "0.7"}))
    assert "vllm:gpu_cache_usage_perc{" in alerts["VLLMKVCacheNearFull"]["expr"]
    assert "vllm:cpu_cache_usage_perc{" in alerts["VLLMKVCacheSwap"]["expr"]


@pytest.mark.parametrize("version", ["0.9", "0.10", "0.11", "0.12", "0.20", "0.30"])
def test_0_9_and_later_use_kv_cache_usage_perc_only(version):
    text = rules_text({"vllm_version": version})
    assert "vllm:kv_cache_usage_perc{" in alerts_by_name(text)["VLLMKVCacheNearFull"]["expr"]
    assert "gpu_cache_usage_perc" not in text


def test_0_8_still_reads_gpu_cache_usage_perc():
    text = rules_text({"vllm_version": "0.8"})
    assert "vllm:gpu_cache_usage_perc{" in text
    assert "kv_cache_usage_perc" not in text


def test_the_error_rate_counts_abort_and_error_over_every_finished_request():
    expr = alerts_by_name(rules_text())["VLLMHighErrorRate"]["expr"]
    assert 'vllm:request_success_total{job="vllm",finished_reason=~"abort|error"}' in expr
    assert 'rate(vllm:request_success_total{job="vllm"}[5m])' in expr


def test_the_kv_rule_explains_why_it_needs_waiting_requests():
    rule = alerts_by_name(rules_text())["VLLMKVCacheNearFull"]
    assert "vllm:num_requests_waiting" in rule["expr"]
    assert "normal under load" in rule["annotations"]["description"]
    assert set(rule["annotations"]) == {"summary", "description", "runbook"}


@pytest.mark.parametrize("field", [f.name for f in GENERATOR.fields])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_every_field_refuses_injection_payloads(field, payload):
    with pytest.raises(SpecErrors) as caught:
        GENERATOR.spec({field: payload})
    assert field in caught.value.errors


@pytest.mark.parametrize(("field", "value"), [("kv_threshold", "1.5"), ("error_rate_threshold", "-0.1"),
                                              ("kv_for", "2 days"), ("gpu_temp_metric", "dcgm.temp"),
                                              ("job", ""), ("queue_threshold", "nan")])  # fmt: skip
def test_out_of_range_and_malformed_values_are_refused(field, value):
    with pytest.raises(SpecErrors) as caught:
        GENERATOR.spec({field: value})
    assert field in caught.value.errors


def titles(given: dict[str, str], severity: str) -> list[str]:
    return [c.title for c in GENERATOR.checks(GENERATOR.spec(given)) if c.severity == severity]


def test_the_guide_preset_raises_no_warnings():
    assert titles({}, "warning") == []


def test_it_warns_when_the_kv_threshold_fires_under_normal_load():
    assert any("under normal load" in t for t in titles({"kv_threshold": "0.8"}, "warning"))


def test_it_warns_when_a_for_is_shorter_than_two_scrapes():
    assert any("VLLMServiceDown" in t and "two scrapes" in t for t in titles({"down_for": "20s"}, "warning"))


def test_it_warns_when_the_error_rate_threshold_waits_for_most_requests_to_fail():
    assert any("most requests fail" in t for t in titles({"error_rate_threshold": "0.6"}, "warning"))


def test_it_explains_why_v1_versions_have_no_swap_rule():
    assert "No KV swap rule for vLLM 0.11" in titles({}, "ok")
    assert "KV swap rule included" in titles({"vllm_version": "0.7"}, "ok")
