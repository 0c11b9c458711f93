"""The upgrade diff without the inventory: the version table, the metrics the console, the
generated alert rules and the generated dashboard read that a new vLLM renames or drops, the
launch flags and defaults that change, the sizing under both versions, the regenerated configs."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from core.i18n import later
from diagnostics.sizing import catalog
from diagnostics.sizing.calculator import SizingSpec
from diagnostics.upgrades import diff, facts, texts
from diagnostics.upgrades.facts import Exposure, VersionError
from fleet import gpu_catalog
from fleet.simulator import vllm_versions

PUBLIC = re.compile(r"^https://(github\.com|docs\.vllm\.ai|blog\.vllm\.ai)/")


def spec(gpu: str = "h100-80gb", model: str = "Qwen/Qwen3-8B", **flags) -> SizingSpec:
    entry = catalog.find(model, catalog.shipped())
    flags.setdefault("gpu_memory_utilization", 0.9)
    flags.setdefault("max_model_len", 32768)
    return SizingSpec(arch=entry.architecture(), gpu=gpu_catalog.get(gpu), gpus=1, **flags)


def target(name: str = "vllm-a", *, extra_args: str = "", gpu: str = "h100-80gb", **flags) -> diff.Target:
    values = {"model": "Qwen/Qwen3-8B", "name": name, "gpu_memory_utilization": "0.9"}
    values["max_model_len"] = "32768"
    return diff.Target(name, values, extra_args, spec(gpu, **flags))


def find(report: diff.Report, source: str, metric: str) -> diff.MetricFinding:
    return next(m for m in report.metrics if m.source == source and m.metric == metric)


def flag(report: diff.Report, subject: str, kind: str) -> diff.FlagFinding:
    return next(f for f in report.flags if f.change.subject == subject and f.change.kind == kind)


# -- versions -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("0.11.2", (0, 11, 2)),
        ("v0.8.5", (0, 8, 5)),
        ("0.10", (0, 10, 0)),
        ("0.10.2.dev378+g4d7fe40fc", (0, 10, 2)),
    ],
)
def test_versions_are_read_as_numbers(text, parsed):
    assert facts.parse_version(text) == parsed


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("abc", "0.11.2", "'abc' is not a vLLM version like 0.11.2"),
        ("0.8.5", "", "'' is not a vLLM version"),
        ("0.6.3", "0.11.2", "older than 0.7.0"),
        ("0.11.2", "0.8.5", "must be newer than the old one 0.11.2"),
        ("0.11.2", "0.11.2", "must be newer"),
    ],
)
def test_a_bad_version_is_a_clear_error(old, new, says):
    with pytest.raises(VersionError) as error:
        diff.diff(old, new)
    assert says in str(error.value.args[0])


# -- (a) metrics --------------------------------------------------------------------------------


def test_0_8_5_to_0_11_2_names_the_kv_usage_rename_that_silences_the_generated_rules_and_panel():
    report = diff.diff("0.8.5", "0.11.2")
    alert = find(report, "alerts", "vllm:gpu_cache_usage_perc")
    assert alert.status == "gone" and alert.severity == "bad"
    assert alert.replacement == "vllm:kv_cache_usage_perc"
    assert alert.escape_hatch == "--show-hidden-metrics-for-version=0.10"  # 0.11.x still has the hatch
    assert "hidden from 0.11.0" in str(alert.message) and "can never fire" in str(alert.message)
    panel = find(report, "dashboard", "vllm:gpu_cache_usage_perc")
    assert panel.user == "KV cache usage" and "goes empty" in str(panel.message)
    console = find(report, "console", "vllm:gpu_cache_usage_perc")  # the probes read both names
    assert console.status == "follows" and console.replacement == "vllm:kv_cache_usage_perc"


def test_0_8_5_to_0_11_2_names_the_inter_token_latency_rename():
    report = diff.diff("0.8.5", "0.11.2")
    panel = find(report, "dashboard", "vllm:time_per_output_token_seconds")
    # 0.11 still exposes the old name, deprecated; hidden from 0.12.
    assert panel.status == "deprecated" and panel.severity == "warning"
    assert panel.replacement == "vllm:inter_token_latency_seconds"
    console = find(report, "console", "vllm:time_per_output_token_seconds")
    assert console.status == "follows" and console.replacement == "vllm:inter_token_latency_seconds"
    assert diff.diff("0.8.5", "0.12.0").metrics[0].severity == "bad"
    gone = find(diff.diff("0.8.5", "0.12.0"), "dashboard", "vllm:time_per_output_token_seconds")
    assert gone.status == "gone" and gone.escape_hatch == "--show-hidden-metrics-for-version=0.11"
    removed = find(diff.diff("0.8.5", "0.13.0"), "dashboard", "vllm:time_per_output_token_seconds")
    assert removed.escape_hatch == "" and "removed in 0.13.0" in str(removed.message)


def test_0_8_5_to_0_11_2_names_the_prefix_cache_renames_and_their_unit():
    report = diff.diff("0.8.5", "0.11.2")
    for old, new in (
        ("vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_queries_total"),
        ("vllm:gpu_prefix_cache_hits_total", "vllm:prefix_cache_hits_total"),
    ):
        finding = find(report, "console", old)
        assert finding.replacement == new and finding.status == "follows"
        assert finding.severity == "info" and "blocks" in str(finding.about)  # blocks became tokens


def test_the_regenerated_configs_read_the_new_names():
    report = diff.diff("0.8.5", "0.11.2", instance=target())
    names = [f.name for f in report.files]
    assert names == ["vllm-a-serve.sh", "vllm-alerts.yml", "vllm-dashboard.json"]
    alerts, board = report.file("vllm-alerts.yml").content, report.file("vllm-dashboard.json").content
    assert "vllm:kv_cache_usage_perc" in alerts and "gpu_cache_usage_perc" not in alerts
    assert "inter_token_latency_seconds" in board and "time_per_output_token_seconds" not in board
    assert yaml.safe_load(alerts)["groups"] and json.loads(board)["panels"]
    assert "vLLM 0.11" in report.file("vllm-a-serve.sh").content
    assert report.choices["alerts"] == ("0.8", "0.11") and not report.errors
    assert not [m for m in report.metrics if m.source == "regenerated"]


def test_a_regenerated_file_that_reads_a_name_the_patch_release_lacks_is_flagged():
    # The generators offer whole minor versions: their 0.9 names are 0.9.2's, so 0.9.1 lacks them.
    report = diff.diff("0.8.5", "0.9.1")
    mismatch = find(report, "regenerated", "vllm:kv_cache_usage_perc")
    assert mismatch.status == "mismatch" and mismatch.severity == "warning"


def test_leaving_the_v0_engine_loses_the_swap_metrics():
    report = diff.diff("0.7.3", "0.8.5")
    assert find(report, "console", "vllm:cpu_cache_usage_perc").status == "lost"
    swap = find(report, "alerts", "vllm:cpu_cache_usage_perc")
    assert swap.status == "gone" and swap.severity == "bad" and "V1 engine never swaps" in str(swap.about)


# -- (b) flags ----------------------------------------------------------------------------------


def test_flags_of_the_launch_that_change_are_named_with_the_launches_that_use_them():
    launch = target(extra_args="--swap-space 4 --num-scheduler-steps 8")
    report = diff.diff("0.8.5", "0.11.2", instance=launch)
    steps = flag(report, "--num-scheduler-steps", "removed")
    assert steps.severity == "bad" and steps.used_by == ("vllm-a",)
    # The generated 0.8.5 command turns request logging off with the flag 0.10 deprecates.
    logging = flag(report, "--disable-log-requests", "deprecated")
    assert logging.severity == "warning" and logging.used_by == ("vllm-a",)
    assert flag(report, "VLLM_USE_V1", "env").severity == "warning"
    assert flag(report, "--guided-decoding-backend", "removed").severity == "info"  # not on this launch
    (command,) = report.commands
    assert command.dropped == ("--disable-log-requests",) and not command.added
    later = diff.diff("0.11.2", "0.18.0", instance=target(extra_args="--swap-space 4"))
    assert flag(later, "--swap-space", "removed").severity == "bad"


# -- (c) defaults and sizing ----------------------------------------------------------------------


def test_a_default_change_is_shown_with_its_effect_on_the_kv_cache():
    report = diff.diff("0.11.2", "0.20.0", instance=target())
    ids = [d.change.id for d in report.defaults]
    assert "gpu_memory_utilization_092" in ids and "cuda_graph_memory_subtracted" in ids
    gmu = next(d for d in report.defaults if d.change.id == "gpu_memory_utilization_092")
    assert "0.92" in str(gmu.applies[0])
    (sizing,) = report.sizing
    before, after, left_out = (case.summary() for case in sizing.cases)
    assert before["cuda_graphs_gib"] == 0 and after["cuda_graphs_gib"] > 0  # taken from the KV budget
    assert after["kv_cache_tokens"] < before["kv_cache_tokens"]
    assert sizing.delta("kv_cache_tokens") < 0
    assert left_out["gpu_memory_utilization"] == 0.92
    assert left_out["kv_cache_tokens"] > after["kv_cache_tokens"]


def test_the_a100_batch_defaults_of_0_8_are_sized_before_and_after():
    report = diff.diff("0.8.5", "0.11.2", instance=target(gpu="a100-80gb"))
    change = next(d for d in report.defaults if d.change.id == "a100_batch_defaults")
    assert "leaves them unset" in str(change.applies[0])
    (sizing,) = report.sizing
    before, after = sizing.before.summary(), sizing.after.summary()
    assert (before["max_num_seqs"], before["max_num_batched_tokens"]) == (1024, 8192)
    assert (after["max_num_seqs"], after["max_num_batched_tokens"]) == (256, 2048)
    assert sizing.before.modelled == "0.10"  # the oldest accounting the calculator has
    assert any("0.10" in str(note) for note in sizing.notes)


def test_versions_outside_the_calculator_are_not_sized_but_still_compared():
    report = diff.diff("0.7.3", "0.11.2", instance=target())
    (sizing,) = report.sizing
    assert sizing.before.sizing is None and "V0 engine" in str(sizing.before.problem)
    assert sizing.after.sizing is not None
    newest = diff.diff("0.20.0", "0.40.0", instance=target())
    assert newest.sizing[0].after.sizing is None and newest.files


def test_an_instance_that_cannot_be_sized_says_why():
    unsized = diff.Target("vllm-x", {}, "", None, (later("the instance has no GPUs in the inventory"),))
    (sizing,) = diff.diff("0.8.5", "0.11.2", instance=unsized).sizing
    assert "no GPUs" in str(sizing.problem) and not sizing.cases


def test_the_fleet_report_covers_every_target_and_serialises():
    report = diff.diff("0.8.5", "0.11.2", fleet=[target("a"), target("b", extra_args="--swap-space 2")])
    assert report.scope == "fleet" and report.targets == ("a", "b")
    assert [f.name for f in report.files][:2] == ["a-serve.sh", "b-serve.sh"]
    assert flag(report, "--disable-log-requests", "deprecated").used_by == ("a", "b")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["from"] == "0.8.5" and data["to"] == "0.11.2" and len(data["sizing"]) == 2
    assert data["counts"]["bad"] >= 2


# -- the table ----------------------------------------------------------------------------------


def test_every_fact_has_a_public_source_and_words():
    table = facts.load()
    ids = table.every_id()
    assert len(ids) == len(set(ids))
    assert set(ids) == set(texts.TEXTS)
    for fact in (*table.metrics.values(), *table.flags, *table.defaults):
        assert fact.sources, fact.id
        assert all(PUBLIC.match(source) for source in fact.sources), fact.id
        assert fact.certainty in ("source", "inferred")
    for fact in table.metrics.values():
        assert fact.name.startswith("vllm:")
        if fact.replacement:
            assert table.exposure(fact.replacement, (0, 30, 0)) is not Exposure.UNKNOWN


def test_the_table_agrees_with_the_simulator_on_what_each_version_exposes():
    table = facts.table()
    versions = ["0.8.0", "0.8.5", "0.9.1", "0.9.2", "0.10.2", "0.11.0", "0.11.2", "0.12.0", "0.13.0"]
    versions.append("0.20.0")
    compared = 0
    for name in table.metrics:
        simulated = name if name in vllm_versions.METRICS else name.removesuffix("_total")
        if simulated not in vllm_versions.METRICS:
            continue
        for version in versions:
            ours = table.exposure(name, facts.parse_version(version)).exposed
            assert ours == vllm_versions.exposed(simulated, version), (name, version)
            compared += 1
    assert compared > 50
