"""The docker-compose file shows the shape of a deployment: a central worker on the console
queue, probers that share the probe sweeps' chunks, and a GPU host's agent that has the
broker and its token but neither the database nor the console's secret key."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_the_central_worker_consumes_the_console_queue():
    command = services()["worker"]["command"]
    assert command[command.index("--queues") + 1] == "console"


def test_the_probers_consume_the_probe_chunks_and_can_be_scaled():
    prober = services()["prober"]
    assert prober["command"][prober["command"].index("--queues") + 1] == "probes"
    assert "ports" not in prober and "container_name" not in prober  # `--scale prober=N` works


def test_the_agent_runs_on_its_hosts_queues_without_the_database_or_the_secret_key():
    agent = services()["agent"]
    assert agent["command"][2:4] == ["agent", "--host"]
    assert set(agent["environment"]) == {"CELERY_BROKER_URL", "OPS_AGENT_TOKEN"}
    assert agent["pid"] == "host" and all(v.endswith(":ro") for v in agent["volumes"])
    assert agent["profiles"] == ["agent"]  # `docker compose up` alone does not start it
