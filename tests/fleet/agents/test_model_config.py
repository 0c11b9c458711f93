"""`agent.model_config` end to end: a real agent process, under its root, reads a model
directory for sizing (config.json, the index, the shards' sizes, a Hugging Face cache snapshot
through its links) and its signed answer lands on the AgentRequest through the central worker;
a directory without config.json or one reached through a link out of the root is answered with
what is wrong, never with what lies outside."""

from __future__ import annotations

import json

import pytest

from core.i18n import shown
from fleet.agent import dispatch
from fleet.models import AgentRequest, HostAgent
from tests.conftest import wait_for
from tests.factories import make_host
from tests.fleet.hostchecks.test_model_dir import CONFIG, INDEX, hf_cache, write_model

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]


@pytest.fixture
def agent_on_tree(tmp_path, celery_worker_thread, start_agent):
    """Host node-a's agent, reading the tree under tmp_path/host as the host's /."""
    root = tmp_path / "host"
    write_model(root / "models/tiny-1b")
    snapshot = hf_cache(root)
    (root / "models/no-config").mkdir(parents=True)
    write_model(tmp_path / "outside/secret")
    (root / "models/escape").symlink_to("../../outside/secret")
    host = make_host(name="node-a", address="127.0.0.1")
    agent = HostAgent.objects.create(host=host)
    process = start_agent(agent, nvml="off", root=root)
    assert wait_for(lambda: HostAgent.objects.get(pk=agent.pk).last_heartbeat_at, timeout=60), (
        process.output()
    )
    return host, process, "/" + str(snapshot.relative_to(root))


def answer_for(host, process, model_dir: str) -> dict:
    request = dispatch.ask("agent.model_config", host=host, purpose="test", expires_s=60, model_dir=model_dir)
    assert wait_for(lambda: AgentRequest.objects.get(pk=request.pk).status == "answered", timeout=30), (
        process.output()
    )
    return AgentRequest.objects.get(pk=request.pk).answer


def test_the_agent_sends_the_config_the_index_and_the_shards_sizes(agent_on_tree):
    host, process, snapshot = agent_on_tree

    model = answer_for(host, process, "/models/tiny-1b")["model"]
    assert json.loads(model["config_text"]) == CONFIG and json.loads(model["index_text"]) == INDEX
    assert (model["safetensors_count"], model["safetensors_bytes"]) == (2, 3_000)

    cached = answer_for(host, process, snapshot)["model"]  # links into ../../blobs, followed
    assert cached["model_dir"] == snapshot and json.loads(cached["config_text"]) == CONFIG
    assert (cached["safetensors_count"], cached["safetensors_bytes"]) == (2, 3_000)


def test_the_agent_says_what_is_wrong_and_reads_nothing_outside_its_root(agent_on_tree):
    host, process, _ = agent_on_tree

    missing = answer_for(host, process, "/models/no-config")
    assert "model" not in missing
    assert shown(missing["error"]).startswith(
        "/models/no-config has no config.json: is this the model's snapshot"
    )

    escaped = answer_for(host, process, "/models/escape")
    assert "model" not in escaped and "LlamaForCausalLM" not in json.dumps(escaped)
    assert "leads outside the agent's root" in shown(escaped["error"])

    relative = answer_for(host, process, "models/tiny-1b")
    assert "is not an absolute path" in shown(relative["error"])
