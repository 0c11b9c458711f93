"""`python -m fleet.agent.selfcheck`: what an agent would report on this machine, as JSON, with
no broker, database or Celery: here over a fixture host tree without NVML."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fleet.host_trees import build_host_tree

ROOT = Path(__file__).resolve().parents[3]


def test_the_self_check_prints_the_snapshot_and_the_checklist_in_english(tmp_path):
    host = build_host_tree(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "fleet.agent.selfcheck", "--root", str(host), "--nvml", "off",
         "--model-dir", "/models/Qwen2.5-72B-Instruct", "--docker-socket", str(tmp_path / "none.sock")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["nvml"] == {"error": "NVML off"}
    assert [e["pid"] for e in report["snapshot"]["engines"]] == [2716]
    assert report["snapshot"]["instances"][0]["engine_pid"] == 2716  # the tree's vLLM holds port 8000
    items = {item["key"]: item for item in report["predeploy"]["items"]}
    assert items["port"]["status"] == "fail" and "8000" in items["port"]["evidence"]
    assert report["predeploy"]["overall"] == "not ready"
