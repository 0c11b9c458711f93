"""A model sized from its directory on a GPU host, read by the host's agent: the sizing page's
"From a host" card (ask, poll, then the sizing with the inputs the page had), `manage.py size
--host NAME --model-dir PATH`, and the service that turns the agent's answer into a catalogue
model (the weights from the index or the shards, hf_quant_config.json folded in as vLLM reads
it). End to end with a real agent process and the central worker on Redis; the service also
from an answer the agent's own reader made."""

from __future__ import annotations

import html
import io
import json
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from diagnostics import host_model_service
from diagnostics.models import ModelSpec
from fleet.hostchecks.model_dir import read_model_dir
from fleet.models import AgentRequest, HostAgent
from tests.conftest import HTMX_HEADERS, wait_for
from tests.diagnostics.test_hub import CONFIG
from tests.factories import make_host
from tests.fleet.agents.conftest import redis_broker, start_agent  # noqa: F401  (the agents' fixtures)

INDEX = {"metadata": {"total_size": 16_060_522_496}, "weight_map": {"lm_head.weight": "model-2.safetensors"}}
SHARDS = {"model-1.safetensors": 2_000, "model-2.safetensors": 1_000}
NVFP4 = {"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": {"quant_algo": "NVFP4"}}
SIZING_INPUTS = {"model": "qwen3-8b", "gpu": "l40s", "gpus": "1", "max_model_len": "8192"}


def write_model(folder, *, config=CONFIG, index=None, quant=None, shards=SHARDS):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    for name, content in (("model.safetensors.index.json", index), ("hf_quant_config.json", quant)):
        if content is not None:
            (folder / name).write_text(json.dumps(content))
    for name, size in shards.items():
        (folder / name).write_bytes(b"\0" * size)


def host_tree(root):
    """A host's models: a sharded Llama with its index, a ModelOpt NVFP4 one with
    hf_quant_config.json and no index, and a directory without config.json."""
    write_model(root / "models/llama-3b", index=INDEX)
    write_model(root / "models/llama-3b-nvfp4", quant=NVFP4)
    (root / "models/no-config").mkdir(parents=True)
    return root


@pytest.fixture
def engineer_client(client, cast):
    client.force_login(cast.engineer)
    return client


@pytest.fixture
def live_agent(tmp_path, celery_worker_thread, request):
    """node-a's agent, a real process reading the tree under tmp_path/host as its /."""
    start = request.getfixturevalue("start_agent")
    host = make_host(name="node-a", address="127.0.0.1")
    agent = HostAgent.objects.create(host=host)
    process = start(agent, nvml="off", root=host_tree(tmp_path / "host"))
    assert wait_for(lambda: HostAgent.objects.get(pk=agent.pk).last_heartbeat_at, timeout=60), (
        process.output()
    )
    return host, process


def poll_url(card: str) -> str:
    """The URL a waiting card polls (its hx-get)."""
    return html.unescape(card.split('hx-get="', 1)[1].split('"', 1)[0])


def poll(client, url, process):
    """The card's poll, as htmx repeats it each second, until it stops (a redirect or 286)."""
    answers = []

    def answered():
        answers.append(client.get(url, **HTMX_HEADERS))
        return "HX-Redirect" in answers[-1] or answers[-1].status_code == 286

    assert wait_for(answered, timeout=30), process.output()
    return answers[-1]


# End to end: the page and the command, with a real agent --------------------------------------


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_the_page_reads_a_model_on_a_host_and_sizes_it_with_the_inputs_it_had(live_agent, engineer_client):
    _, process = live_agent
    page = engineer_client.get(reverse("diagnostics:sizing")).content.decode()
    assert 'id="host-fetch"' in page and f'hx-get="{reverse("diagnostics:sizing-host")}"' in page
    card = engineer_client.get(reverse("diagnostics:sizing-host"), **HTMX_HEADERS).content.decode()
    assert card.startswith('<section id="host-fetch"') and '<option value="node-a"' in card
    assert 'placeholder="/models/&lt;name&gt;"' in card and 'hx-include="#sizing-form"' in card

    posted = {"host": "node-a", "model_dir": "/models/llama-3b/", **SIZING_INPUTS}
    asked = engineer_client.post(reverse("diagnostics:sizing-host"), posted, **HTMX_HEADERS)
    waiting = asked.content.decode()
    assert asked.status_code == 200 and 'hx-trigger="every 1s"' in waiting
    assert "’s agent for <code>/models/llama-3b</code>…" in waiting and "node-a" in waiting
    request_id = AgentRequest.objects.get(task="agent.model_config").request_id
    done = poll(engineer_client, poll_url(waiting), process)

    spec = ModelSpec.objects.get(sources__icontains=request_id)
    assert (spec.name, spec.source, spec.weight_bytes) == (
        "node-a:/models/llama-3b",
        "uploaded",
        16_060_522_496,
    )
    assert spec.sources[0].startswith("node-a:/models/llama-3b/config.json, read by the host's agent on ")
    assert spec.sources[1] == "node-a:/models/llama-3b/model.safetensors.index.json"
    target = urlparse(done["HX-Redirect"])
    assert parse_qs(target.query) == {
        "model": [spec.key], "gpu": ["l40s"], "gpus": ["1"], "max_model_len": ["8192"]
    }  # fmt: skip
    sized = html.unescape(engineer_client.get(done["HX-Redirect"]).content.decode())
    assert (
        "Starts:" in sized
        and f"node-a's agent read /models/llama-3b: it is in the sizing catalogue as {spec.key}" in sized
    )
    again = engineer_client.get(poll_url(waiting))  # a second look at an answered request: the same model
    assert again.status_code == 302 and ModelSpec.objects.filter(sources__icontains=request_id).count() == 1


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_what_the_agent_cannot_read_shows_on_the_card_with_the_upload(live_agent, engineer_client):
    _, process = live_agent
    posted = {"host": "node-a", "model_dir": "/models/no-config"}
    waiting = engineer_client.post(
        reverse("diagnostics:sizing-host"), posted, **HTMX_HEADERS
    ).content.decode()
    stopped = poll(engineer_client, poll_url(waiting), process)
    card = stopped.content.decode()
    assert stopped.status_code == 286 and "HX-Redirect" not in stopped
    assert "could not read the model" in card and "has no config.json: is this the model" in card
    assert 'role="alert"' in card and f'href="{reverse("diagnostics:sizing-upload")}"' in card
    assert 'value="/models/no-config"' in card  # the form again, as it was


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_the_command_waits_for_the_agent_and_sizes_what_it_read(live_agent):
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "size", "--host", "node-a", "--model-dir", "/models/llama-3b-nvfp4", "--gpu", "h100-80gb",
        "--json", stdout=out, stderr=err,
    )  # fmt: skip
    result = json.loads(out.getvalue())
    spec = ModelSpec.objects.get(name="node-a:/models/llama-3b-nvfp4")
    assert result["model"] == spec.name and f"in the catalogue as {spec.key}" in err.getvalue()
    assert spec.config["quantization_config"]["quant_method"] == "modelopt_fp4"
    assert spec.entry().architecture().quantization == "nvfp4"
    assert spec.weight_bytes == 3_000  # no index: the shards' total
    with pytest.raises(CommandError, match="node-a's agent could not read the model: .*has no config.json"):
        call_command("size", "--host", "node-a", "--model-dir", "/models/no-config", "--gpu", "l40s")


@pytest.mark.browser
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_in_a_browser_the_card_is_used_by_keyboard_and_keeps_the_pages_inputs(
    live_agent, page, live_server, cast
):
    from django.db import connections

    from tests.browser import OUTPUT_DIR, log_in

    try:
        log_in(page, live_server, cast.engineer, "/sizing/?model=qwen3-8b&gpu=l40s&max_model_len=8192")
        page.wait_for_selector("#host-fetch select[name=host]")  # the card, loaded after the page
        page.focus("#host-fetch select[name=host]")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.name") == "model_dir"
        page.keyboard.type("/models/llama-3b")
        page.keyboard.press("Enter")
        page.wait_for_selector("#host-fetch [role=status]")  # asked, polling
        page.wait_for_url("**model=node-a-models-llama-3b**", timeout=30_000)
        assert "gpu=l40s" in page.url and "max_model_len=8192" in page.url
        assert "node-a's agent read /models/llama-3b" in page.inner_text("body")
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT_DIR / "sizing-from-host.png"), full_page=True)
    finally:
        connections.close_all()


@pytest.mark.django_db
def test_engineers_alone_read_models_on_hosts(viewer_client):
    host = make_host(name="node-a")
    HostAgent.objects.create(host=host, last_heartbeat_at=timezone.now())
    asked = AgentRequest.objects.create(host=host, task=host_model_service.TASK, expires_at=timezone.now())
    assert viewer_client.get(reverse("diagnostics:sizing-host")).status_code == 403
    assert (
        viewer_client.post(
            reverse("diagnostics:sizing-host"), {"host": "node-a", "model_dir": "/m"}
        ).status_code
        == 403
    )
    assert (
        viewer_client.get(reverse("diagnostics:sizing-host-answer", args=[asked.request_id])).status_code
        == 403
    )
    assert AgentRequest.objects.count() == 1


# Without an agent -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_with_no_live_agent_the_card_says_so_and_offers_the_upload(engineer_client):
    stale = HostAgent.objects.create(host=make_host(name="node-z"))
    HostAgent.objects.filter(pk=stale.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    card = engineer_client.get(reverse("diagnostics:sizing-host"), **HTMX_HEADERS).content.decode()
    assert "No GPU host has a live agent" in card and "<form" not in card
    assert f'href="{reverse("diagnostics:sizing-upload")}"' in card
    page = engineer_client.get(reverse("diagnostics:sizing-host"))  # the full page, without htmx
    assert page.status_code == 200 and "No GPU host has a live agent" in page.content.decode()
    refused = engineer_client.post(reverse("diagnostics:sizing-host"), {"host": "node-z", "model_dir": "/m"})
    assert refused.status_code == 400 and not AgentRequest.objects.exists()


@pytest.mark.django_db
def test_the_command_names_what_is_missing():
    make_host(name="node-z")
    with pytest.raises(CommandError, match="node-z has no live agent to read the model directory"):
        call_command("size", "--host", "node-z", "--model-dir", "/models/x", "--gpu", "l40s")
    with pytest.raises(CommandError, match="--host needs --model-dir, an absolute path"):
        call_command("size", "--host", "node-z", "--model-dir", "models/x", "--gpu", "l40s")


@pytest.mark.redis
@pytest.mark.django_db
@pytest.mark.usefixtures("redis_broker")
def test_the_command_gives_up_when_no_answer_comes_in_time():
    host = make_host(name="node-q")
    HostAgent.objects.create(host=host, last_heartbeat_at=timezone.now())  # beating, but nothing consumes
    with pytest.raises(CommandError, match="node-q's agent did not answer within 1 s: is it running"):
        call_command("size", "--host", "node-q", "--model-dir", "/models/x", "--gpu", "l40s", "--wait", "1")


def test_the_page_form_refuses_a_relative_directory(db, engineer_client):
    HostAgent.objects.create(host=make_host(name="node-a"), last_heartbeat_at=timezone.now())
    card = engineer_client.post(
        reverse("diagnostics:sizing-host"), {"host": "node-a", "model_dir": "models/x"}, **HTMX_HEADERS
    ).content.decode()
    assert "Give an absolute path, like /models/Qwen3-8B." in card and not AgentRequest.objects.exists()


# The service, from an answer the agent's own reader made ---------------------------------------


def answered(host, answer, **fields) -> AgentRequest:
    now = timezone.now()
    return AgentRequest.objects.create(
        host=host, task=host_model_service.TASK, purpose="sizing", expires_at=now + timedelta(seconds=30),
        status=AgentRequest.Status.ANSWERED, answer=answer, answered_at=now, **fields,
    )  # fmt: skip


def test_an_answer_becomes_one_catalogue_model_however_often_it_is_read(db, tmp_path):
    root = host_tree(tmp_path)
    request = answered(
        make_host(name="node-a"), {"model": read_model_dir("/models/llama-3b", root=root).to_dict()}
    )
    first = host_model_service.outcome(request)
    again = host_model_service.outcome(request)
    assert first.spec is not None and again.spec.pk == first.spec.pk
    assert ModelSpec.objects.filter(sources__icontains=request.request_id).count() == 1
    first.spec.full_clean()  # what the admin would accept


def test_reading_the_same_directory_again_refreshes_its_model_in_place(db, tmp_path):
    root, host = host_tree(tmp_path), make_host(name="node-a")
    first = answered(host, {"model": read_model_dir("/models/llama-3b", root=root).to_dict()})
    spec = host_model_service.outcome(first).spec
    (root / "models/llama-3b/config.json").write_text(json.dumps({**CONFIG, "num_hidden_layers": 20}))
    second = answered(host, {"model": read_model_dir("/models/llama-3b", root=root).to_dict()})
    refreshed = host_model_service.outcome(second).spec
    assert (refreshed.pk, refreshed.key) == (spec.pk, spec.key) and refreshed.config[
        "num_hidden_layers"
    ] == 20
    assert second.request_id in refreshed.sources[0]
    assert (
        host_model_service.outcome(first).spec.config["num_hidden_layers"] == 20
    )  # the older answer: no change
    write_model(root / "models/LLAMA-3B", index=INDEX)  # paths are case-sensitive: another model
    other = answered(host, {"model": read_model_dir("/models/LLAMA-3B", root=root).to_dict()})
    assert host_model_service.outcome(other).spec.pk != spec.pk


def test_hf_quant_config_is_folded_in_as_vllm_reads_it_unless_config_json_has_its_own(tmp_path):
    root = host_tree(tmp_path)
    files = read_model_dir("/models/llama-3b-nvfp4", root=root)
    entry = host_model_service.build_entry(files, host="node-a", request_id="r1")
    assert entry.config["quantization_config"] == {**NVFP4, "quant_method": "modelopt_fp4"}
    assert entry.architecture().quantization == "nvfp4"
    assert entry.sources[-1].endswith(
        "hf_quant_config.json, folded into quantization_config as vLLM reads it"
    )
    own = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    write_model(root / "models/own", config={**CONFIG, "quantization_config": own}, quant=NVFP4)
    entry = host_model_service.build_entry(
        read_model_dir("/models/own", root=root), host="node-a", request_id="r2"
    )
    assert entry.config["quantization_config"] == own and not any("hf_quant" in s for s in entry.sources)


def test_the_weights_come_from_the_shards_when_there_is_no_index(tmp_path):
    files = read_model_dir("/models/llama-3b-nvfp4", root=host_tree(tmp_path))
    entry = host_model_service.build_entry(files, host="node-a", request_id="r1")
    assert entry.weight_bytes == 3_000
    assert "node-a:/models/llama-3b-nvfp4: 2 *.safetensors files, 3,000 bytes" in entry.sources


def test_a_config_naming_its_hub_id_names_the_model_by_it(tmp_path):
    write_model(tmp_path / "models/x", config={**CONFIG, "_name_or_path": "acme/tiny-1b"}, index=INDEX)
    entry = host_model_service.build_entry(
        read_model_dir("/models/x", root=tmp_path), host="node-a", request_id="r"
    )
    assert (entry.name, entry.hf_id, entry.key) == (
        "acme/tiny-1b (node-a)",
        "acme/tiny-1b",
        "acme-tiny-1b-node-a",
    )
    write_model(tmp_path / "models/y", config={**CONFIG, "_name_or_path": "/models/y"}, index=INDEX)
    entry = host_model_service.build_entry(
        read_model_dir("/models/y", root=tmp_path), host="node-a", request_id="r"
    )
    assert (entry.name, entry.hf_id) == ("node-a:/models/y", "")


def test_what_went_wrong_is_said_and_nothing_is_saved(db, tmp_path):
    host = make_host(name="node-a")
    error = {"error": {"msgid": "%(dir)s has no config.json", "params": {"dir": "/models/x"}}}
    said = host_model_service.outcome(answered(host, error)).error
    assert str(said) == "node-a's agent could not read the model: /models/x has no config.json"
    bad = host_model_service.outcome(answered(host, {"model": {"model_dir": "/m", "config_text": 3}})).error
    assert (
        str(bad)
        == "node-a's agent sent an answer the console cannot read: config_text: expected str, got int"
    )
    write_model(tmp_path / "models/bin-only", shards={})
    files = read_model_dir("/models/bin-only", root=tmp_path)
    unsized = host_model_service.outcome(answered(host, {"model": files.to_dict()})).error
    assert str(unsized).startswith("node-a:/models/bin-only: ") and "parameter count" in str(unsized)
    late = AgentRequest.objects.create(
        host=host, task=host_model_service.TASK, expires_at=timezone.now() - timedelta(seconds=1)
    )
    AgentRequest.objects.filter(pk=late.pk).update(sent_at=late.expires_at - timedelta(seconds=30))
    late.refresh_from_db()
    assert str(host_model_service.outcome(late).error).startswith("node-a's agent did not answer within 30 s")
    assert not ModelSpec.objects.filter(source=ModelSpec.Source.UPLOADED).exists()


def test_an_answer_with_a_config_nested_past_reason_is_refused_and_nothing_is_saved(db):
    host = make_host(name="node-a")
    model = {"model_dir": "/models/x", "config_text": "[" * 100_000 + "]" * 100_000, "safetensors_bytes": 10}
    said = host_model_service.outcome(answered(host, {"model": model})).error
    assert str(said) == "node-a:/models/x: config.json nests more than 32 levels deep"
    huge = {"model_dir": "/models/x", "config_text": json.dumps(CONFIG), "safetensors_bytes": 2**80}
    said = host_model_service.outcome(answered(host, {"model": huge})).error
    assert str(said).endswith("safetensors_bytes: more than 1,125,899,906,842,624")
    assert not ModelSpec.objects.filter(source=ModelSpec.Source.UPLOADED).exists()
