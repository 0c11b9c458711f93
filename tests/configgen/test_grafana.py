"""The Grafana dashboard generator: the JSON has the shape Grafana's dashboard schema expects,
the guide's four rows in order, panels that tile the 24-column grid without overlapping, and
PromQL that promtool parses and that names only metrics the chosen vLLM version exposes."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from diagnostics.configgen.base import SpecErrors
from diagnostics.configgen.grafana import GENERATOR
from diagnostics.configgen.vllm_metric_names import GPU_EXPORTERS, VERSIONS, metrics_for
from tests.configgen.test_alert_rules import PAYLOADS, run_promtool

ROW_TITLES = ["Overview", "Latency", "Resources", "Throughput"]
VLLM_METRIC = re.compile(r"vllm:[a-z0-9_]+")

# Independent of the generator's table (docs/guide-corrections.md, appendix A.1).
KV_NAME = {"0.7": "vllm:gpu_cache_usage_perc", "0.8": "vllm:gpu_cache_usage_perc"}
ITL_OLD = {"0.7", "0.8", "0.9", "0.10"}


def dashboard(given: dict[str, str] | None = None) -> dict[str, Any]:
    (config,) = GENERATOR.render(GENERATOR.spec(given or {}))
    assert config.name == "vllm-dashboard.json"
    assert config.language == "json"
    return json.loads(config.content)


def content_panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def exprs(board: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in content_panels(board) for target in panel["targets"]]


SPREAD = [
    {"vllm_version": version, "gpu_exporter": exporter}
    for version, exporter in itertools.product(VERSIONS, sorted(GPU_EXPORTERS))
]


@pytest.mark.parametrize("given", SPREAD, ids=lambda g: f"{g['vllm_version']}-{g['gpu_exporter']}")
def test_the_dashboard_has_the_top_level_keys_grafana_expects(given):
    board = dashboard(given)
    assert {"title", "uid", "schemaVersion", "panels", "templating", "time", "refresh"} <= set(board)
    assert board["schemaVersion"] == 39
    assert isinstance(board["schemaVersion"], int)
    assert isinstance(board["panels"], list)
    assert isinstance(board["templating"]["list"], list)
    assert set(board["time"]) == {"from", "to"}
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", board["uid"])


@pytest.mark.parametrize("given", SPREAD, ids=lambda g: f"{g['vllm_version']}-{g['gpu_exporter']}")
def test_every_panel_has_a_unique_id_a_type_a_title_and_a_grid_position(given):
    panels = dashboard(given)["panels"]
    ids = [p["id"] for p in panels]
    assert all(type(i) is int for i in ids)
    assert len(set(ids)) == len(ids)
    for panel in panels:
        assert panel["type"] in {"row", "stat", "timeseries"}
        assert panel["title"]
        grid = panel["gridPos"]
        assert set(grid) == {"x", "y", "w", "h"}
        assert all(type(grid[k]) is int for k in grid)
        assert grid["x"] >= 0 and grid["y"] >= 0 and grid["w"] > 0 and grid["h"] > 0
        assert grid["x"] + grid["w"] <= 24


@pytest.mark.parametrize("given", SPREAD, ids=lambda g: f"{g['vllm_version']}-{g['gpu_exporter']}")
def test_no_two_panels_overlap(given):
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard(given)["panels"]:
        g = panel["gridPos"]
        for cell in itertools.product(range(g["x"], g["x"] + g["w"]), range(g["y"], g["y"] + g["h"])):
            assert cell not in cells, f"{panel['title']} overlaps {cells[cell]} at {cell}"
            cells[cell] = panel["title"]


@pytest.mark.parametrize("given", SPREAD, ids=lambda g: f"{g['vllm_version']}-{g['gpu_exporter']}")
def test_every_content_panel_has_targets_with_expr_and_ref_id(given):
    for panel in content_panels(dashboard(given)):
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(set(ref_ids)) == len(ref_ids)
        for target in panel["targets"]:
            assert target["expr"].strip() and target["refId"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}


def test_there_are_exactly_the_guides_four_rows_in_order_each_followed_by_its_panels():
    panels = dashboard()["panels"]
    rows = [p for p in panels if p["type"] == "row"]
    assert [r["title"] for r in rows] == ROW_TITLES
    assert panels[0]["type"] == "row"
    ys = [p["gridPos"]["y"] for p in panels]
    assert ys == sorted(ys)
    assert all(not r["collapsed"] and r["gridPos"]["w"] == 24 for r in rows)


def test_the_rows_hold_the_guides_panels():
    panels, current, by_row = dashboard()["panels"], "", {}
    for panel in panels:
        if panel["type"] == "row":
            current = panel["title"]
            by_row[current] = []
        else:
            by_row[current].append(panel["title"])
    assert by_row == {
        "Overview": ["Service up", "QPS (finished requests/s)", "Success rate", "Waiting requests"],
        "Latency": [
            "TTFT p50 / p95 / p99",
            "End-to-end latency p50 / p95 / p99",
            "Inter-token latency p50 / p95 / p99",
        ],
        "Resources": [
            "GPU memory used",
            "KV cache usage",
            "GPU utilization and temperature",
            "CPU memory (vLLM process)",
        ],
        "Throughput": ["Prompt tokens/s", "Generation tokens/s", "Running vs waiting requests"],
    }


def test_the_datasource_and_instance_variables_are_in_the_templating_list():
    variables = {v["name"]: v for v in dashboard({"job": "llm-prod"})["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    assert variables["instance"]["type"] == "query"
    assert variables["instance"]["definition"] == 'label_values(up{job="llm-prod"}, instance)'


@pytest.mark.parametrize("version", VERSIONS)
def test_every_vllm_metric_queried_is_one_the_version_exposes(version):
    exposed = metrics_for(version).exposed
    for expr in exprs(dashboard({"vllm_version": version})):
        for name in VLLM_METRIC.findall(expr):
            assert name.removesuffix("_bucket") in exposed, f"{version} does not expose {name}: {expr}"


@pytest.mark.parametrize("version", VERSIONS)
def test_the_renamed_metrics_follow_the_version(version):
    text = " ".join(exprs(dashboard({"vllm_version": version})))
    kv = KV_NAME.get(version, "vllm:kv_cache_usage_perc")
    assert kv + "{" in text
    assert ("gpu_cache_usage_perc" in text) == (kv == "vllm:gpu_cache_usage_perc")
    itl = "time_per_output_token_seconds" if version in ITL_OLD else "inter_token_latency_seconds"
    assert f"vllm:{itl}_bucket" in text
    assert ("cpu_cache_usage_perc" in text) == (version == "0.7")
    assert ("num_requests_swapped" in text) == (version == "0.7")
    assert "request_failure_total" not in json.dumps(dashboard({"vllm_version": version}))


@pytest.mark.parametrize("exporter", sorted(GPU_EXPORTERS))
def test_the_gpu_panels_read_the_chosen_exporter(exporter):
    text = " ".join(exprs(dashboard({"gpu_exporter": exporter})))
    prefix, other = ("DCGM_FI_DEV_", "nvidia_smi_") if exporter == "dcgm" else ("nvidia_smi_", "DCGM_FI_DEV_")
    assert prefix in text and other not in text


@pytest.mark.parametrize("version", ["0.7", "0.11", "0.30"])
def test_promtool_parses_every_dashboard_expression(tmp_path: Path, version):
    # Grafana's own variables become what Grafana would substitute before the query is sent.
    queries = [
        e.replace("$__rate_interval", "1m").replace("$instance", ".*")
        for e in exprs(dashboard({"vllm_version": version}))
    ]
    rules = [{"record": f"dashboard:query_{i}", "expr": q} for i, q in enumerate(queries)]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, sort_keys=False))
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_title_and_refresh_reach_the_dashboard():
    board = dashboard({"title": "vLLM production (A100)", "refresh": "1m"})
    assert board["title"] == "vLLM production (A100)"
    assert board["refresh"] == "1m"


def test_the_uid_differs_between_versions_and_titles():
    uids = {dashboard({"vllm_version": v, "title": t})["uid"] for v in ("0.7", "0.11") for t in ("a", "b")}
    assert len(uids) == 4


@pytest.mark.parametrize("field", [f.name for f in GENERATOR.fields])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_every_field_refuses_injection_payloads(field, payload):
    with pytest.raises(SpecErrors) as caught:
        GENERATOR.spec({field: payload})
    assert field in caught.value.errors


def test_a_blank_title_is_refused():
    with pytest.raises(SpecErrors) as caught:
        GENERATOR.spec({"title": "  "})
    assert "title" in caught.value.errors


def test_the_checks_name_the_metrics_the_version_reads():
    checks = GENERATOR.checks(GENERATOR.spec({"vllm_version": "0.12"}))
    assert any("vllm:kv_cache_usage_perc" in c.title and "inter_token_latency" in c.title for c in checks)
    assert not [c for c in checks if c.severity in ("warning", "error")]
