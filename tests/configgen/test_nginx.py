"""The nginx gateway generator with Debian's nginx: every preset and a spread of values pass
`nginx -t`; in front of the simulator, a burst above the limit gets 429 with the JSON body
while requests within it pass, and a streamed completion arrives token by token."""

from __future__ import annotations

import functools
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from diagnostics.configgen import nginx
from diagnostics.configgen.base import SpecErrors
from fleet.simulator.spec import InstanceSpec
from tests.configgen.nginx_runner import RunningNginx, check_config

SPREAD = [
    {},
    {"tls": "on"},
    {"balancing": "round_robin", "keepalive": "0", "nodelay": "off"},
    {"balancing": "ip_hash", "batch_cidrs": "", "anonymous_key": "shared"},
    {"balancing": "random", "upstream_servers": "[::1]:8000\nlocalhost:8001", "retry_after_s": "0"},
    {"proxy_read_timeout": "10m", "client_max_body_size": "512k", "fail_timeout": "1m"},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def self_signed(folder):
    import subprocess

    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=llm-api",
         "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    return {"tls_certificate": str(folder / "cert.pem"), "tls_certificate_key": str(folder / "key.pem")}


@pytest.mark.parametrize("preset", list(nginx.PRESETS))
def test_every_preset_passes_nginx_t(preset, tmp_path):
    (file,) = nginx.render(nginx.GENERATOR.spec({}, preset=preset))
    result = check_config(tmp_path, file.content)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("values", SPREAD, ids=range(len(SPREAD)))
def test_a_spread_of_form_values_passes_nginx_t(values, tmp_path):
    if values.get("tls") == "on":
        values = {**values, **self_signed(tmp_path)}
    (file,) = nginx.render(nginx.GENERATOR.spec(values))
    result = check_config(tmp_path, file.content)
    assert result.returncode == 0, result.stderr


def test_the_generated_gateway_passes_its_own_cross_checks():
    checks = nginx.checks(nginx.GENERATOR.spec({}))
    assert [c for c in checks if c.severity != "ok"] == []
    assert any("Timeout chain: engine 120s < gateway 150s < client 180s" in c.title for c in checks)


def test_the_cross_checks_catch_a_broken_chain_a_wild_burst_and_a_shared_anonymous_bucket():
    spec = nginx.GENERATOR.spec(
        {"proxy_read_timeout": "100s", "burst_per_ip": "500", "anonymous_key": "shared"}
    )
    titles = " | ".join(c.title for c in nginx.checks(spec) if c.severity != "ok")
    assert "proxy_read_timeout 100s is not above the longest generation (120s)" in titles
    assert "burst 500 is more than 10 s of the zone's rate (30 r/s)" in titles
    assert "every client without an API key shares one bucket" in titles
    late = nginx.GENERATOR.spec({"proxy_read_timeout": "200s", "client_read_timeout_s": "180"})
    assert any(c.title.endswith("is not below the client's read timeout 180s") for c in nginx.checks(late))


@pytest.fixture
def gateway(simulate, tmp_path):
    """nginx with the generated config (2 r/s per IP, burst 3) in front of one simulated vLLM."""
    sim = simulate(InstanceSpec(name="target", version="0.11.2", max_model_len=8192))
    upstream = sim.url("target").removeprefix("http://")
    port = free_port()
    spec = nginx.GENERATOR.spec(
        {"listen_port": str(port), "upstream_servers": upstream, "rate_per_ip": "2", "burst_per_ip": "3",
         "rate_per_key": "100", "burst_per_key": "100", "server_name": "localhost"}
    )  # fmt: skip
    running = RunningNginx(tmp_path, nginx.render(spec)[0].content, port)
    yield f"http://127.0.0.1:{port}", sim
    running.stop()


@functools.cache
def _model(base):
    return httpx.get(base + "/v1/models", timeout=5).json()["data"][0]["id"]


def _chat(base, **body):
    payload = {
        "model": _model(base),
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        **body,
    }
    return httpx.post(base + "/v1/chat/completions", json=payload, timeout=20)


def test_a_burst_above_the_limit_gets_429_with_the_json_body_and_requests_within_it_pass(gateway):
    base, _ = gateway
    time.sleep(1.1)  # the start-up probe's request has left the bucket
    with ThreadPoolExecutor(max_workers=12) as pool:
        responses = list(pool.map(lambda _: _chat(base), range(12)))
    codes = sorted(r.status_code for r in responses)
    assert codes.count(200) >= 3 and codes.count(429) >= 5, codes  # rate 2/s + burst 3, nodelay
    limited = next(r for r in responses if r.status_code == 429)
    assert limited.headers["content-type"] == "application/json"
    assert limited.json()["error"]["type"] == "rate_limit_error"
    assert limited.headers["retry-after"] == "1"
    assert "nginx" not in limited.text
    time.sleep(2)
    assert _chat(base).status_code == 200  # the bucket refills


def test_a_streamed_completion_arrives_token_by_token_not_buffered(gateway):
    base, sim = gateway
    httpx.post(sim.url("target") + "/_sim/faults", json={"kind": "tps_drop", "factor": 8})
    arrivals = []
    payload = {
        "model": _model(base),
        "messages": [{"role": "user", "content": "count"}],
        "max_tokens": 24,
        "stream": True,
    }
    with httpx.stream("POST", base + "/v1/chat/completions", json=payload, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data:"):
                arrivals.append(time.monotonic())
    assert len(arrivals) >= 10
    spread = arrivals[-1] - arrivals[0]
    assert spread > 0.3, "every chunk arrived at once: the response was buffered"
    # Chunks arrive spread over the generation, not in one block at its end.
    assert sum(1 for t in arrivals if t < arrivals[0] + spread / 2) >= 3


def test_an_engine_error_reaches_the_client_as_json_without_its_internal_text(gateway):
    base, sim = gateway
    _model(base)  # before the fault, which fails every path
    httpx.post(sim.url("target") + "/_sim/faults", json={"kind": "http_500", "fraction": 1.0})
    time.sleep(1.1)
    response = _chat(base)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"


PAYLOADS = ["x\nserver { }", "a; return 200", "{evil}", 'a"b', "$host", "a'b"]


@pytest.mark.parametrize("field", [f.name for f in nginx.FIELDS if f.kind not in ("choice", "bool")])
def test_injection_payloads_are_refused_in_every_field_naming_it(field):
    for payload in PAYLOADS:
        with pytest.raises(SpecErrors) as caught:
            nginx.GENERATOR.spec({field: payload})
        assert field in caught.value.errors, (field, payload)
