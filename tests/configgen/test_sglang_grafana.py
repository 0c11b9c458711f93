"""The SGLang row of the Grafana dashboard: with SGLang chosen the dashboard keeps the shape
Grafana expects (ids, grid, targets, templating), its PromQL parses with promtool and names
only metrics SGLang exports, and the vLLM dashboard is unchanged unless SGLang is chosen."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from diagnostics.configgen.grafana import GENERATOR
from diagnostics.configgen.vllm_metric_names import GPU_EXPORTERS
from tests.configgen.test_alert_rules import run_promtool
from tests.configgen.test_sglang_alert_rules import SGLANG_METRICS

VLLM_ROWS = ["Overview", "Latency", "Resources", "Throughput"]
SPREAD = [
    {"engine": engine, "gpu_exporter": exporter, "vllm_version": version}
    for engine, exporter, version in itertools.product(
        ("sglang", "both"), sorted(GPU_EXPORTERS), ("0.7", "0.11")
    )
]


def dashboard(given: dict[str, str] | None = None) -> dict[str, Any]:
    (config,) = GENERATOR.render(GENERATOR.spec(given or {}))
    assert config.name == "vllm-dashboard.json" and config.language == "json"
    return json.loads(config.content)


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def exprs(board: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in panels(board) for target in panel["targets"]]


def rows(board: dict[str, Any]) -> dict[str, list[str]]:
    current, by_row = "", {}
    for panel in board["panels"]:
        if panel["type"] == "row":
            current = panel["title"]
            by_row[current] = []
        else:
            by_row[current].append(panel["title"])
    return by_row


@pytest.mark.parametrize("given", SPREAD, ids=lambda g: "-".join(g.values()))
def test_the_dashboard_keeps_the_shape_grafana_expects(given):
    board = dashboard(given)
    assert {"title", "uid", "schemaVersion", "panels", "templating", "time", "refresh"} <= set(board)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", board["uid"])
    ids = [p["id"] for p in board["panels"]]
    assert len(set(ids)) == len(ids) and all(type(i) is int for i in ids)
    cells: dict[tuple[int, int], str] = {}
    for panel in board["panels"]:
        g = panel["gridPos"]
        assert set(g) == {"x", "y", "w", "h"} and g["x"] + g["w"] <= 24
        for cell in itertools.product(range(g["x"], g["x"] + g["w"]), range(g["y"], g["y"] + g["h"])):
            assert cell not in cells, f"{panel['title']} overlaps {cells[cell]}"
            cells[cell] = panel["title"]
    for panel in panels(board):
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert panel["targets"] and len(set(ref_ids)) == len(ref_ids)
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}


def test_the_engine_choice_picks_the_rows():
    assert list(rows(dashboard())) == VLLM_ROWS
    assert list(rows(dashboard({"engine": "sglang"}))) == ["SGLang"]
    assert list(rows(dashboard({"engine": "both"}))) == [*VLLM_ROWS, "SGLang"]
    assert rows(dashboard({"engine": "both"}))["Overview"] == rows(dashboard())["Overview"]


def test_the_sglang_row_answers_the_operators_questions():
    assert rows(dashboard({"engine": "sglang"}))["SGLang"] == [
        "SGLang up",
        "Running requests",
        "Queued requests",
        "Token usage (KV cache)",
        "SGLang TTFT p50 / p95 / p99",
        "SGLang inter-token latency p50 / p95 / p99",
        "SGLang end-to-end latency p50 / p95 / p99",
        "Generation throughput (tokens/s)",
        "Token usage and prefix cache hit rate",
        "SGLang running vs queued requests",
    ]


def test_the_sglang_panels_pick_their_targets_with_their_own_variable():
    board = dashboard({"engine": "both", "sglang_job": "sglang-prod"})
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert list(variables) == ["DS_PROMETHEUS", "instance", "sglang_instance"]
    assert variables["sglang_instance"]["definition"] == 'label_values(up{job="sglang-prod"}, instance)'
    for expr in exprs(board):
        if "sglang:" in expr or 'job="sglang-prod"' in expr:
            assert 'job="sglang-prod", instance=~"$sglang_instance"' in expr
    only = [v["name"] for v in dashboard({"engine": "sglang"})["templating"]["list"]]
    assert only == ["DS_PROMETHEUS", "sglang_instance"]


@pytest.mark.parametrize("engine", ["sglang", "both"])
def test_every_sglang_metric_queried_is_one_sglang_exports(engine):
    for expr in exprs(dashboard({"engine": engine})):
        for name in re.findall(r"sglang:[a-z0-9_]+", expr):
            assert name.removesuffix("_bucket") in SGLANG_METRICS, expr
    assert not any("vllm:" in e for e in exprs(dashboard({"engine": "sglang"})))


@pytest.mark.parametrize("engine", ["sglang", "both"])
def test_promtool_parses_every_expression(tmp_path: Path, engine):
    queries = [
        e.replace("$__rate_interval", "1m").replace("$sglang_instance", ".*").replace("$instance", ".*")
        for e in exprs(dashboard({"engine": engine}))
    ]
    rules = [{"record": f"dashboard:query_{i}", "expr": q} for i, q in enumerate(queries)]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, sort_keys=False))
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_vllm_dashboard_does_not_mention_sglang():
    text = json.dumps(dashboard())
    assert "sglang" not in text.lower()


def test_the_default_title_names_the_engines_and_a_custom_one_is_kept():
    assert dashboard({"engine": "sglang"})["title"] == "SGLang overview"
    assert dashboard({"engine": "both"})["title"] == "vLLM and SGLang overview"
    assert dashboard({"engine": "sglang", "title": "Chat fleet"})["title"] == "Chat fleet"
    uids = {dashboard({"engine": e, "title": "Chat fleet"})["uid"] for e in ("vllm", "sglang", "both")}
    assert len(uids) == 3
    assert dashboard({"engine": "sglang"})["tags"] == ["sglang", "llm-ops-console"]


def test_the_checks_say_the_sglang_row_needs_enable_metrics():
    checks = GENERATOR.checks(GENERATOR.spec({"engine": "sglang"}))
    assert [c.severity for c in checks] == ["ok"]
    assert "--enable-metrics" in checks[0].why
    both = GENERATOR.checks(GENERATOR.spec({"engine": "both", "refresh": "10s"}))
    assert any("vllm:" in c.title for c in both) and any(c.severity == "warning" for c in both)
