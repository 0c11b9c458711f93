"""The simulated gateway on real sockets: proxying, streaming, round robin, latency, 502/504."""

from __future__ import annotations

import asyncio
import io
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from aiohttp import web

from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.gateway import GatewayError, GatewaySpec
from fleet.simulator.spec import InstanceSpec
from tests.simulator.conftest import wait_for

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
HELLO = [{"role": "user", "content": "Say hello"}]
ONE_TOKEN = {"model": MODEL, "messages": HELLO, "max_tokens": 1}


def _vllm(name: str) -> InstanceSpec:
    return InstanceSpec(name=name, version="0.11.2", served_model_name=MODEL, max_model_len=4096)


@contextmanager
def upstream_app(routes: list[web.RouteDef]) -> Iterator[str]:
    """A hand-written upstream (aiohttp, its own thread and loop); yields its base URL."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, object] = {}

    async def main() -> None:
        app = web.Application()
        app.add_routes(routes)
        runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=0.1, handler_cancellation=True
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}"
        holder["stop"] = stop = asyncio.Event()
        started.set()
        await stop.wait()
        await runner.cleanup()
        leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in leftovers:  # a handler still sleeping
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield str(holder["url"])
    finally:
        loop.call_soon_threadsafe(holder["stop"].set)  # type: ignore[attr-defined]
        thread.join(10)
        loop.close()


@contextmanager
def gateway_before(routes: list[web.RouteDef], **spec: object) -> Iterator[tuple[SimulatorThread, str]]:
    """A gateway "gw" in front of a hand-written upstream; yields the simulator and the upstream's URL."""
    with (
        upstream_app(routes) as upstream,
        SimulatorThread([], gateways=[GatewaySpec(name="gw", upstreams=(upstream,), **spec)]) as sim,
    ):
        yield sim, upstream


def _ttfb(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    with client.stream("POST", url + "/v1/chat/completions", json={**ONE_TOKEN, "stream": True}) as response:
        assert response.status_code == 200
        chunks = response.iter_raw()
        next(chunks)
        took = time.perf_counter() - started
        for _ in chunks:  # the rest of the stream
            pass
    return took


def test_a_chat_completion_through_the_gateway_reaches_an_upstream_and_returns_its_answer(simulate):
    sim = simulate(_vllm("vllm-a"), gateways=[GatewaySpec(name="gw", upstreams=("vllm-a",))])
    response = httpx.post(
        sim.gateway_url("gw") + "/v1/chat/completions?trace=1",
        json={"model": MODEL, "messages": HELLO, "max_tokens": 5},
        headers={"Authorization": "Bearer k", "X-Request-Id": "abc"},
    )
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == MODEL and body["usage"]["completion_tokens"] == 5
    assert body["choices"][0]["message"]["content"]
    assert response.headers["server"] == "nginx"  # the upstream's Server header is hidden
    assert response.headers["content-type"].startswith("application/json")
    lines = sim.call(lambda: sim.runner.instance("vllm-a").access_log_lines(limit=5))
    assert any('"POST /v1/chat/completions?trace=1 HTTP/1.1" 200' in line for line in lines)
    gateway_log = sim.call(lambda: sim.runner.gateway("gw").access_log_lines(limit=5))
    assert len(gateway_log) == 1
    assert '"POST /v1/chat/completions?trace=1 HTTP/1.1" 200' in gateway_log[0]
    assert f'ua="127.0.0.1:{sim.port("vllm-a")}" us="200"' in gateway_log[0]


def test_method_path_query_headers_and_body_reach_the_upstream_and_hop_by_hop_headers_do_not():
    seen: dict[str, object] = {}

    async def echo(request: web.Request) -> web.Response:
        seen.update(
            method=request.method,
            path_qs=request.raw_path,
            headers=dict(request.headers),
            body=await request.read(),
        )
        return web.Response(status=201, body=b"made", headers={"X-Upstream": "yes", "Server": "uvicorn"})

    with gateway_before([web.route("*", "/{tail:.*}", echo)]) as (sim, upstream):
        response = httpx.put(
            sim.gateway_url("gw") + "/a%2Fb/c?x=1&y=%20",
            content=b"\x00payload",
            headers={"X-Custom": "1", "Keep-Alive": "timeout=5", "Connection": "keep-alive, X-Drop"}
            | {"X-Drop": "gone", "Content-Type": "application/x-thing"},
        )
    assert (response.status_code, response.content) == (201, b"made")
    assert response.headers["x-upstream"] == "yes" and response.headers["server"] == "nginx"
    assert seen["method"] == "PUT" and seen["path_qs"] == "/a%2Fb/c?x=1&y=%20"
    assert seen["body"] == b"\x00payload"
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert headers["x-custom"] == "1" and headers["content-type"] == "application/x-thing"
    assert headers["host"] == upstream.removeprefix("http://")  # nginx's default: $proxy_host
    assert headers["connection"] == "close"
    assert "keep-alive" not in headers and "x-drop" not in headers


def test_a_streamed_chat_completion_arrives_in_several_chunks_before_the_stream_ends(simulate):
    sim = simulate(_vllm("vllm-a"), gateways=[GatewaySpec(name="gw", upstreams=("vllm-a",))])
    request = {"model": MODEL, "messages": HELLO, "max_tokens": 20, "stream": True}
    arrivals: list[tuple[float, bytes]] = []
    started = time.perf_counter()
    with httpx.stream("POST", sim.gateway_url("gw") + "/v1/chat/completions", json=request) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for chunk in response.iter_raw():
            arrivals.append((time.perf_counter() - started, chunk))
    ended = time.perf_counter() - started
    text = b"".join(chunk for _, chunk in arrivals).decode()
    events = [line for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and len(events) >= 20
    assert len(arrivals) >= 5  # not one buffered lump
    first_at = arrivals[0][0]
    assert ended - first_at > 0.05  # the first tokens came well before the stream ended


def test_a_chunk_reaches_the_client_before_the_upstream_writes_the_next():
    """Unbuffered for certain: the upstream writes its second chunk only once the client has
    read the first through the gateway."""
    client_saw_first = threading.Event()

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: one\n\n")
        waited = await asyncio.to_thread(client_saw_first.wait, 10)
        await response.write(b"data: two\n\n" if waited else b"data: timed-out\n\n")
        await response.write_eof()
        return response

    with (
        gateway_before([web.post("/v1/chat/completions", stream)]) as (sim, _),
        httpx.stream("POST", sim.gateway_url("gw") + "/v1/chat/completions", json={}) as response,
    ):
        chunks = response.iter_raw()
        assert next(chunks) == b"data: one\n\n"
        client_saw_first.set()
        assert b"".join(chunks) == b"data: two\n\n"


def test_requests_go_round_robin_across_the_upstreams(simulate):
    sim = simulate(
        _vllm("vllm-a"), _vllm("vllm-b"), gateways=[GatewaySpec(name="gw", upstreams=("vllm-a", "vllm-b"))]
    )
    with httpx.Client() as client:
        for _ in range(6):
            assert (
                client.post(sim.gateway_url("gw") + "/v1/chat/completions", json=ONE_TOKEN).status_code == 200
            )
    state = sim.call(lambda: sim.runner.gateway("gw").state())
    assert list(state["requests_per_upstream"].values()) == [3, 3]
    for name in ("vllm-a", "vllm-b"):
        lines = sim.call(lambda n=name: sim.runner.instance(n).access_log_lines(limit=20))
        assert sum('"POST /v1/chat/completions' in line for line in lines) == 3


def test_the_added_latency_shows_in_the_ttfb_through_the_gateway(simulate):
    sim = simulate(
        _vllm("vllm-a"),
        gateways=[GatewaySpec(name="gw", upstreams=("vllm-a",), added_latency_s=0.15)],
        control_port=0,
    )
    with httpx.Client() as client:
        _ttfb(client, sim.url("vllm-a"))  # warm both paths
        _ttfb(client, sim.gateway_url("gw"))
        direct = statistics.median(_ttfb(client, sim.url("vllm-a")) for _ in range(3))
        through = statistics.median(_ttfb(client, sim.gateway_url("gw")) for _ in range(3))
        assert through > direct + 0.1
        # a slow gateway, by the control route
        patched = client.patch(sim.control_url + "/_sim/gateways/gw", json={"added_latency_s": 0.4})
        assert patched.status_code == 200 and patched.json()["added_latency_s"] == 0.4
        slow = statistics.median(_ttfb(client, sim.gateway_url("gw")) for _ in range(3))
        assert slow > through + 0.15
        bad = client.patch(sim.control_url + "/_sim/gateways/gw", json={"added_latency_s": -1})
        assert bad.status_code == 400 and bad.json()["field"] == "added_latency_s"
        assert client.patch(sim.control_url + "/_sim/gateways/nope", json={}).status_code == 404
        listed = client.get(sim.control_url + "/_sim/gateways").json()["gateways"]
        assert [(g["name"], g["added_latency_s"]) for g in listed] == [("gw", 0.4)]


def test_an_upstream_that_refuses_connections_is_skipped_and_502_when_none_answers(simulate):
    sim = simulate(
        _vllm("vllm-a"), _vllm("vllm-b"), gateways=[GatewaySpec(name="gw", upstreams=("vllm-a", "vllm-b"))]
    )
    sim.inject("vllm-a", {"kind": "refuse_connections"})
    sim.wait_listening("vllm-a", False)
    url = sim.gateway_url("gw") + "/v1/chat/completions"
    with httpx.Client() as client:
        assert [client.post(url, json=ONE_TOKEN).status_code for _ in range(4)] == [200] * 4
        sim.inject("vllm-b", {"kind": "refuse_connections"})
        sim.wait_listening("vllm-b", False)
        response = client.post(url, json=ONE_TOKEN)
    assert response.status_code == 502
    assert response.headers["content-type"] == "text/html" and response.headers["server"] == "nginx"
    assert "<title>502 Bad Gateway</title>" in response.text
    assert "<hr><center>nginx</center>" in response.text
    last = sim.call(lambda: sim.runner.gateway("gw").access_log_lines(limit=1))[0]
    assert '" 502 ' in last and 'us="502, 502"' in last


def test_a_hanging_upstream_is_a_504_after_the_read_timeout(simulate):
    sim = simulate(
        _vllm("vllm-a"), gateways=[GatewaySpec(name="gw", upstreams=("vllm-a",), read_timeout_s=0.4)]
    )
    sim.inject("vllm-a", {"kind": "hang"})
    started = time.perf_counter()
    response = httpx.post(sim.gateway_url("gw") + "/v1/chat/completions", json=ONE_TOKEN, timeout=10)
    took = time.perf_counter() - started
    assert response.status_code == 504
    assert "<title>504 Gateway Time-out</title>" in response.text
    assert 0.35 < took < 3


def test_a_post_that_timed_out_is_not_sent_to_the_next_upstream_but_a_get_is(simulate):
    sim = simulate(
        _vllm("vllm-a"),
        _vllm("vllm-b"),
        gateways=[GatewaySpec(name="gw", upstreams=("vllm-a", "vllm-b"), read_timeout_s=0.3)],
    )
    sim.inject("vllm-a", {"kind": "hang"})
    url = sim.gateway_url("gw")
    with httpx.Client(timeout=10) as client:
        assert client.post(url + "/v1/chat/completions", json=ONE_TOKEN).status_code == 504  # vllm-a
        assert client.post(url + "/v1/chat/completions", json=ONE_TOKEN).status_code == 200  # vllm-b
        assert client.get(url + "/v1/models").status_code == 200  # vllm-a timed out, then vllm-b


def test_an_upstream_silent_mid_stream_cuts_the_client_response_short():
    async def stall(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: one\n\n")
        await asyncio.sleep(30)
        return response

    with (
        gateway_before([web.post("/v1/chat/completions", stall)], read_timeout_s=0.3) as (sim, _),
        httpx.stream("POST", sim.gateway_url("gw") + "/v1/chat/completions", json={}) as response,
    ):
        assert response.status_code == 200
        chunks = response.iter_raw()
        assert next(chunks) == b"data: one\n\n"
        with pytest.raises(httpx.RemoteProtocolError):
            list(chunks)


def test_a_client_that_goes_away_aborts_the_upstream_request(simulate):
    sim = simulate(_vllm("vllm-a"), gateways=[GatewaySpec(name="gw", upstreams=("vllm-a",))])
    request = {"model": MODEL, "messages": HELLO, "max_tokens": 2000, "stream": True}
    with httpx.stream("POST", sim.gateway_url("gw") + "/v1/chat/completions", json=request) as response:
        next(response.iter_raw())
    wait_for(lambda: sim.state("vllm-a")["counters"]["finished"].get("abort"), what="the abort")
    assert sim.state("vllm-a")["scheduler"]["running"] == 0
    gateway_log = lambda: sim.call(lambda: sim.runner.gateway("gw").access_log_lines(limit=1))  # noqa: E731
    wait_for(lambda: bool(gateway_log()), what="the access line")
    assert '" 499 ' in gateway_log()[0]


def test_specs_and_knobs_are_checked():
    with pytest.raises(GatewayError, match="no upstream"):
        GatewaySpec(name="gw")
    with pytest.raises(GatewayError, match="added_latency_s"):
        GatewaySpec(name="gw", upstreams=("a",), added_latency_s=-0.1)
    with pytest.raises(GatewayError, match="read_timeout_s"):
        GatewaySpec(name="gw", upstreams=("a",), read_timeout_s=0)
    with pytest.raises(GatewayError, match="no simulated instance 'zz'"):
        SimulatorThread(
            [InstanceSpec(name="a")], gateways=[GatewaySpec(name="gw", upstreams=("zz",))]
        ).__enter__()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"gateway gw cannot listen on 127.0.0.1:{port}"):
            SimulatorThread(
                [InstanceSpec(name="a")], gateways=[GatewaySpec(name="gw", port=port, upstreams=("a",))]
            ).__enter__()
    with pytest.raises(ValueError, match="gateway ports must differ"):
        SimulatorThread(
            [InstanceSpec(name="a", port=18555)],
            gateways=[GatewaySpec(name="gw", port=18555, upstreams=("a",))],
        ).__enter__()


@pytest.mark.django_db
def test_the_demo_inventory_simulates_llm_gateway_on_8080_before_its_three_vllm_instances():
    from dataclasses import replace

    from django.core.management import call_command

    from fleet.models import Gateway
    from fleet.simulator.gateway import gateway_specs_from_inventory
    from fleet.simulator.spec import specs_from_inventory

    call_command("demo_fleet", stdout=io.StringIO())
    specs = specs_from_inventory()
    gateways, notes = gateway_specs_from_inventory(s.name for s in specs)
    assert notes == []
    assert [(g.name, g.host, g.port, g.kind) for g in gateways] == [
        ("llm-gateway", "127.0.0.1", 8080, "nginx")
    ]
    assert Gateway.objects.get().url == "http://127.0.0.1:8080"  # the inventory's URL is where it listens
    assert gateways[0].upstreams == ("vllm-llama31-8b", "vllm-qwen25-7b", "vllm-qwen3-32b")
    assert gateways[0].added_latency_s == 0.005 and gateways[0].read_timeout_s == 60

    # The same specs on free ports (8080 and 8101-8105 may be taken where the tests run).
    free = [replace(s, port=0) for s in specs]
    with SimulatorThread(free, gateways=[replace(gateways[0], port=0)]) as sim:
        url = sim.gateway_url("llm-gateway") + "/v1/models"
        served = {httpx.get(url).json()["data"][0]["id"] for _ in range(3)}
        # Its upstreams serve three models: a chat request finds the one serving its model
        # whichever upstream's turn it is (nginx's proxy_next_upstream http_404 non_idempotent).
        chat = sim.gateway_url("llm-gateway") + "/v1/chat/completions"
        answers = [
            httpx.post(chat, json={**ONE_TOKEN, "model": "Qwen/Qwen2.5-7B-Instruct"}) for _ in range(3)
        ]
    assert served == {"meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-32B"}
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert {a.json()["model"] for a in answers} == {"Qwen/Qwen2.5-7B-Instruct"}
    assert gateways[0].next_upstream_on_404


def test_without_next_upstream_on_404_a_request_gets_the_404_of_the_upstream_whose_turn_it_is(simulate):
    sim = simulate(
        _vllm("vllm-a"), _vllm("vllm-b"), gateways=[GatewaySpec(name="gw", upstreams=("vllm-a", "vllm-b"))]
    )
    wrong = {**ONE_TOKEN, "model": "no-such-model"}
    with httpx.Client() as client:
        statuses = [client.post(sim.gateway_url("gw") + "/v1/chat/completions", json=wrong).status_code
                    for _ in range(2)]  # fmt: skip
    assert statuses == [404, 404]
    state = sim.call(lambda: sim.runner.gateway("gw").state())
    assert list(state["requests_per_upstream"].values()) == [1, 1]  # one attempt each, no retry


@pytest.mark.django_db
def test_a_loopback_gateway_with_no_simulated_instance_is_left_out_with_a_note():
    from fleet.models import Gateway
    from fleet.simulator.gateway import gateway_specs_from_inventory

    Gateway.objects.create(name="empty", url="http://127.0.0.1:8081")
    Gateway.objects.create(name="remote", url="http://10.0.0.1:8080")
    assert gateway_specs_from_inventory([]) == (
        [],
        ["gateway empty not simulated: none of its instances is simulated"],
    )
