"""The probes' own HTTP client (fleet.probes.http_client) against real sockets: a sweep's
metrics scrape goes over the connection its health request opened and timed, a kept
connection the server closed is replaced rather than reported, and the bounds (size,
read timeout) hold as they did through httpx."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from fleet.probes.fetch import fetch_bounded, make_instance_client
from fleet.probes.instance_probe import probe_instance
from fleet.probes.outcomes import Outcome
from fleet.probes.parts import ProbeKind
from tests.probes.engines import FAST, VLLM_METRICS, make_target
from tests.probes.servers import read_request, serve

pytestmark = pytest.mark.anyio


class KeepAliveServer:
    """An HTTP/1.1 server that keeps connections open and counts them; `close_idle` makes
    it close each connection after its first answer without saying so (as a server whose
    keep-alive timeout passed does)."""

    def __init__(self, *, close_idle: bool = False, gzip_body: bool = False) -> None:
        self.connections = 0
        self.requests: list[str] = []
        self.close_idle = close_idle
        self.gzip_body = gzip_body

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                request = await read_request(reader)
                self.requests.append(request.path)
                body = VLLM_METRICS.encode() if request.path == "/metrics" else b""
                extra = ""
                if self.gzip_body and body:
                    body, extra = gzip.compress(body), "Content-Encoding: gzip\r\n"
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
                writer.write(head.encode() + body)
                await writer.drain()
                if self.close_idle:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def keep_alive_server(**options: bool) -> AsyncIterator[tuple[str, KeepAliveServer]]:
    state = KeepAliveServer(**options)
    async with serve(state.handle) as url:
        yield url, state


async def test_a_sweeps_metrics_scrape_goes_over_the_connection_its_health_request_opened():
    async with keep_alive_server() as (url, server), make_instance_client(limits=FAST) as client:
        probe = await probe_instance(
            client=client, target=make_target(url), previous_scrape=None, limits=FAST,
            kinds={ProbeKind.HEALTH, ProbeKind.METRICS}, light_health=True,
        )  # fmt: skip
    assert (probe.outcome, probe.scrape_result.outcome) == (Outcome.OK, Outcome.OK)
    assert probe.scrape.gauges["kv_cache_usage"] == 0.25
    assert sorted(server.requests) == ["/health", "/metrics"]
    assert server.connections == 1


async def test_the_health_requests_connect_phase_is_a_real_connect_even_when_a_connection_is_kept():
    async with keep_alive_server() as (url, server), make_instance_client(limits=FAST) as client:
        await fetch_bounded(client=client, url=url + "/metrics", limits=FAST)
        probe = await probe_instance(
            client=client, target=make_target(url), previous_scrape=None, limits=FAST,
            kinds={ProbeKind.HEALTH}, light_health=True,
        )  # fmt: skip
    assert not probe.phases.reused_connection
    assert probe.phases.connect_s is not None and probe.phases.connect_s <= probe.phases.ttfb_s
    assert server.connections == 2


async def test_a_kept_connection_the_server_closed_meanwhile_is_replaced_not_reported_as_reset():
    async with (
        keep_alive_server(close_idle=True) as (url, server),
        make_instance_client(limits=FAST) as client,
    ):
        first = await fetch_bounded(client=client, url=url + "/health", limits=FAST)
        await asyncio.sleep(0.05)  # the server's close reaches the kept connection
        second = await fetch_bounded(client=client, url=url + "/metrics", limits=FAST)
    assert (first.outcome, second.outcome) == (Outcome.OK, Outcome.OK)
    assert server.requests == ["/health", "/metrics"] and server.connections == 2


async def test_a_gzipped_page_is_read_decoded_and_bounded_by_its_decoded_size():
    async with keep_alive_server(gzip_body=True) as (url, _), make_instance_client(limits=FAST) as client:
        whole = await fetch_bounded(client=client, url=url + "/metrics", limits=FAST)
        cut = await fetch_bounded(client=client, url=url + "/metrics", limits=FAST, max_bytes=100)
    assert whole.outcome == Outcome.OK and whole.body == VLLM_METRICS.encode()
    assert cut.outcome == Outcome.TOO_LARGE


async def test_a_declared_body_over_the_limit_is_too_large_before_it_is_read():
    async def declared(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(3600)  # no body ever follows

    async with serve(declared) as url, make_instance_client(limits=FAST) as client:
        result = await fetch_bounded(client=client, url=url + "/metrics", limits=FAST)
    assert result.outcome == Outcome.TOO_LARGE and "Content-Length 999999999" in result.error
    assert result.elapsed_s < FAST.read_timeout_s


async def test_a_server_that_stops_answering_midway_is_a_read_timeout_after_the_read_timeout():
    async def stalls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await writer.drain()
        await asyncio.sleep(3600)

    async with serve(stalls) as url, make_instance_client(limits=FAST) as client:
        result = await fetch_bounded(client=client, url=url + "/metrics", limits=FAST)
    assert result.outcome == Outcome.READ_TIMEOUT
    assert FAST.read_timeout_s <= result.elapsed_s < FAST.total_deadline_s
