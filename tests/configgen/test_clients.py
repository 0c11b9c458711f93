"""The client generator: an SDK client and a batch client that compile and work against the
simulator over real sockets, retry through a gateway's 429s, fall back to a second model,
keep to their limits, and refuse values that could change the code they are written into."""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import socket
import subprocess
import sys
import threading
import uuid
from types import ModuleType

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from diagnostics.configgen import clients
from diagnostics.configgen.base import SpecErrors
from fleet.simulator.spec import InstanceSpec

GENERATOR = clients.GENERATOR
NAME = "target"
MODEL = "sim/llama-8b"
KEY_ENV = "SIM_CLIENT_KEY"
KEY = "sim-secret-key"
HELLO = [{"role": "user", "content": "Say hello"}]
FAST = {"connect_timeout_s": "2", "read_timeout_s": "5", "write_timeout_s": "2", "pool_timeout_s": "2"}


@pytest.fixture
def sim(simulate, monkeypatch):
    """One simulated vLLM that wants an API key, and that key in the environment."""
    monkeypatch.setenv(KEY_ENV, KEY)
    return simulate(InstanceSpec(name=NAME, served_model_name=MODEL, api_key=KEY, reasoning=True))


def _api(sim) -> str:
    return sim.url(NAME) + "/v1"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write(tmp_path, preset="", **values) -> dict[str, str]:
    files = {f.name: f.content for f in GENERATOR.render(GENERATOR.spec(values, preset=preset))}
    for name, content in files.items():
        compile(content, name, "exec")
        (tmp_path / name).write_text(content)
    return files


def _load_client(tmp_path, preset="", **values) -> ModuleType:
    _write(tmp_path, preset, **{"api_key_env": KEY_ENV, **values})
    spec = importlib.util.spec_from_file_location(
        f"llm_client_{uuid.uuid4().hex}", tmp_path / "llm_client.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _chat_requests(sim) -> dict[str, float]:
    """http_requests_total for the chat route, by status class."""
    text = httpx.get(sim.url(NAME) + "/metrics").text
    family = next(f for f in text_string_to_metric_families(text) if f.name == "http_requests")
    return {
        s.labels["status"]: s.value
        for s in family.samples
        if s.name == "http_requests_total" and s.labels["handler"] == "/v1/chat/completions"
    }


async def _async_answers(client: ModuleType) -> tuple[str, str]:
    try:
        answer = await client.achat(HELLO, max_tokens=8)
        streamed = "".join([text async for text in client.astream_chat(HELLO, max_tokens=8)])
        return answer, streamed
    finally:
        await client.aclose()


@pytest.mark.parametrize("preset", ["", *clients.PRESETS])
def test_every_preset_renders_a_client_that_answers_sync_async_and_streamed(sim, tmp_path, preset):
    client = _load_client(tmp_path, preset, base_url=_api(sim), model=MODEL)
    try:
        assert client.chat(HELLO, max_tokens=8)
        assert "".join(client.stream_chat(HELLO, max_tokens=8))  # reasoning deltas count as text
    finally:
        client.close()
    answer, streamed = asyncio.run(_async_answers(client))
    assert answer and streamed


def test_the_client_waits_out_a_gateways_429_and_then_succeeds(sim, tmp_path):
    client = _load_client(tmp_path, base_url=_api(sim), model=MODEL, max_retries="3", **FAST)
    sim.inject(NAME, {"kind": "rate_limited", "paths": ["/v1/"], "retry_after_s": 1, "duration_s": 0.5})
    try:
        assert client.chat(HELLO, max_tokens=8)
    finally:
        client.close()
    counts = _chat_requests(sim)
    assert counts.get("4xx", 0) >= 1 and counts["2xx"] == 1


def test_a_refused_primary_falls_back_to_the_second_model_at_the_second_url(simulate, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, KEY)
    sim = simulate(InstanceSpec(name=NAME, served_model_name="sim/fallback-7b", api_key=KEY))
    client = _load_client(
        tmp_path,
        base_url=f"http://127.0.0.1:{_closed_port()}/v1",
        model=MODEL,
        fallback_model="sim/fallback-7b",
        fallback_base_url=_api(sim),
        max_retries="0",
        **FAST,
    )
    try:
        response = client.complete(HELLO, max_tokens=8)
        assert response.model == "sim/fallback-7b" and response.choices[0].message.content
        assert client.chat(HELLO, max_tokens=8)
    finally:
        client.close()
    assert asyncio.run(_async_answers(client))[0]


def test_without_a_fallback_model_the_connection_error_reaches_the_caller(tmp_path):
    client = _load_client(tmp_path, base_url=f"http://127.0.0.1:{_closed_port()}/v1", max_retries="0", **FAST)
    try:
        with pytest.raises(openai.APIConnectionError):
            client.chat(HELLO)
    finally:
        client.close()


def _watch_in_flight(sim, stop: threading.Event, seen: list[int]) -> None:
    while not stop.is_set():
        scheduler = sim.state(NAME)["scheduler"]
        seen.append(scheduler["running"] + scheduler["waiting"])
        stop.wait(0.02)


def test_the_batch_client_answers_every_line_through_429s_within_its_concurrency(sim, tmp_path):
    _write(
        tmp_path,
        base_url=_api(sim),
        model=MODEL,
        api_key_env=KEY_ENV,
        max_retries="10",
        batch_concurrency="4",
        batch_requests_per_s="50",
        max_tokens="32",
        **FAST,
    )
    lines = [json.dumps({"id": f"q{i}", "prompt": f"Question {i}"}) for i in range(19)] + ['"a bare prompt"']
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    sim.inject(NAME, {"kind": "rate_limited", "fraction": 0.3, "retry_after_s": 1, "paths": ["/v1/"]})
    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=_watch_in_flight, args=(sim, stop, seen))
    watcher.start()
    try:
        run = subprocess.run(
            [sys.executable, "batch_client.py", "in.jsonl", "out.jsonl"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        stop.set()
        watcher.join()
    assert run.returncode == 0, run.stderr
    results = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted(r["line"] for r in results) == list(range(1, 21))
    assert all(r["answer"] and r["statuses"][-1] == 200 for r in results)
    assert any(429 in r["statuses"] for r in results)
    assert max(seen) <= 4  # requests inside the engine at any one moment


def test_the_batch_client_records_failed_lines_and_exits_1(tmp_path):
    _write(tmp_path, base_url=f"http://127.0.0.1:{_closed_port()}/v1", max_retries="0", **FAST)
    (tmp_path / "in.jsonl").write_text('{"id": "no-prompt"}\n{"id": "refused", "prompt": "hi"}\n')
    run = subprocess.run(
        [sys.executable, "batch_client.py", "in.jsonl", "out.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    results = {r["id"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert run.returncode == 1 and "0 of 2 lines answered" in run.stderr
    assert results["no-prompt"]["error"] == 'a line needs "prompt" or "messages"'
    assert results["refused"]["statuses"] == [0] and "Connect" in results["refused"]["error"]


def test_values_reach_the_files_only_as_literals_in_the_settings_block(tmp_path):
    values = {"model": "org/model-v2:fp8@rev+1=x", "fallback_model": "org/small", "api_key_env": "MY_KEY"}
    files = _write(tmp_path, fallback_base_url="https://backup.example.com:8443/v1", **values)
    for content in files.values():
        settings = {
            node.targets[0].id: ast.literal_eval(node.value)
            for node in ast.parse(content).body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        }
        assert settings["MODEL"] == values["model"] and settings["API_KEY_ENV"] == "MY_KEY"
        assert content.count(values["model"]) == 1
    assert "backup.example.com" in files["llm_client.py"] and KEY not in "".join(files.values())


FIELDS = [f.name for f in GENERATOR.fields]
PAYLOADS = ["http://x\n import os", "gpt'); import os; ('", "$(id)", 'a"b']


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("field", FIELDS)
def test_a_value_that_could_change_the_code_is_refused_naming_its_field(field, payload):
    with pytest.raises(SpecErrors) as refused:
        GENERATOR.spec({field: payload})
    assert field in refused.value.errors


def _problems(**values) -> list[tuple[str, str]]:
    spec = GENERATOR.spec(values)
    return [(c.severity, c.title) for c in GENERATOR.checks(spec) if c.severity != "ok"]


@pytest.mark.parametrize("preset", ["", *clients.PRESETS])
def test_the_defaults_and_presets_pass_their_own_checks(preset):
    assert [c for c in GENERATOR.checks(GENERATOR.spec({}, preset=preset)) if c.severity != "ok"] == []


@pytest.mark.parametrize(
    ("values", "severity", "title"),
    [
        ({"read_timeout_s": "0"}, "error", "read timeout is 0"),
        ({"max_retries": "11"}, "error", "11 retries"),
        ({"connect_timeout_s": "60", "read_timeout_s": "30"}, "warning", "Connect timeout 60 s is not below"),
        ({"read_timeout_s": "20", "max_tokens": "4096"}, "warning", "shorter than a 4096-token answer"),
        ({"batch_requests_per_s": "0.5", "batch_concurrency": "64"}, "warning", "batch slots idle"),
        ({"fallback_base_url": "http://10.0.0.2:8000/v1"}, "warning", "without a fallback model"),
        (
            {"fallback_model": "meta-llama/Llama-3.1-8B-Instruct"},
            "warning",
            "primary model on the same server",
        ),
    ],
)
def test_checks_explain_settings_that_defeat_themselves(values, severity, title):
    assert any(s == severity and title in t for s, t in _problems(**values)), _problems(**values)
