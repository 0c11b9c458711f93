import asyncio
import time

import pytest

from fleet.probes.outcomes import Outcome
from fleet.probes.phases import measure_phases
from tests.probes.engines import FAST, SLACK_S
from tests.probes.servers import app, closed_port_url, hang, huge, not_http, reset, respond, serve, trickle

pytestmark = pytest.mark.anyio


def _slow(delay: float):
    async def handler(request, writer):
        await asyncio.sleep(delay)
        await respond(writer, 200, {"ok": True})

    return app({"GET /slow": handler})


async def test_it_times_the_phases_cumulatively_like_curl(http_client):
    async with serve(_slow(0.3)) as url:
        result = await measure_phases(client=http_client, url=url + "/slow", limits=FAST)
    assert (result.outcome, result.status) == (Outcome.OK, 200)
    assert result.dns_s == 0.0  # an IP literal needs no lookup
    assert result.tls_s is None  # plain HTTP
    assert 0 <= result.connect_s <= result.ttfb_s <= result.total_s
    assert result.ttfb_s >= 0.3
    assert not result.reused_connection
    assert result.body_bytes == len(b'{"ok": true}')


async def test_a_host_name_is_resolved_and_its_lookup_timed(http_client):
    async with serve(_slow(0)) as url:
        result = await measure_phases(
            client=http_client, url=url.replace("127.0.0.1", "localhost") + "/slow", limits=FAST
        )
    assert result.outcome == Outcome.OK
    assert result.dns_s > 0
    assert result.connect_s >= result.dns_s


async def test_a_name_that_does_not_resolve_is_a_dns_failure(http_client):
    started = time.perf_counter()
    result = await measure_phases(
        client=http_client, url="http://no-such-host.invalid:8000/health", limits=FAST
    )
    assert result.outcome == Outcome.DNS_FAILURE
    assert time.perf_counter() - started < FAST.connect_timeout_s + SLACK_S


async def test_a_closed_port_is_refused(http_client):
    result = await measure_phases(client=http_client, url=closed_port_url() + "/health", limits=FAST)
    assert result.outcome == Outcome.REFUSED
    assert result.ttfb_s is None
    assert "refused" in result.error.lower()


async def test_a_server_that_never_answers_is_a_read_timeout_within_the_deadline(http_client):
    async with serve(hang) as url:
        started = time.perf_counter()
        result = await measure_phases(client=http_client, url=url + "/health", limits=FAST)
    assert result.outcome == Outcome.READ_TIMEOUT
    assert result.connect_s is not None and result.ttfb_s is None
    assert time.perf_counter() - started < FAST.total_deadline_s + SLACK_S


async def test_a_body_trickling_forever_stops_at_the_hard_deadline(http_client):
    async with serve(trickle) as url:
        started = time.perf_counter()
        result = await measure_phases(client=http_client, url=url + "/metrics", limits=FAST)
    assert result.outcome == Outcome.READ_TIMEOUT
    assert result.ttfb_s is not None  # the headers came; the body never ended
    assert result.error == f"the probe's {FAST.total_deadline_s:g} s deadline passed"
    assert FAST.total_deadline_s - 0.5 < time.perf_counter() - started < FAST.total_deadline_s + SLACK_S


async def test_a_reset_connection_is_a_reset(http_client):
    async with serve(reset) as url:
        result = await measure_phases(client=http_client, url=url + "/health", limits=FAST)
    assert result.outcome == Outcome.RESET


async def test_an_error_status_is_a_bad_status_with_the_body_s_message(http_client):
    async def overloaded(request, writer):
        await respond(
            writer,
            429,
            {"error": "Model is overloaded", "error_type": "overloaded"},
            headers={"Retry-After": "5", "Server": "nginx"},
        )

    async with serve(app({"POST /v1/chat/completions": overloaded})) as url:
        result = await measure_phases(
            client=http_client,
            url=url + "/v1/chat/completions",
            method="POST",
            json={"model": "m"},
            limits=FAST,
        )
    assert (result.outcome, result.status) == (Outcome.BAD_STATUS, 429)
    assert result.error == "HTTP 429: overloaded: Model is overloaded"
    assert (result.server, result.retry_after) == ("nginx", "5")


async def test_an_answer_that_is_not_http_is_garbage(http_client):
    async with serve(not_http) as url:
        result = await measure_phases(client=http_client, url=url + "/health", limits=FAST)
    assert result.outcome == Outcome.GARBAGE


async def test_a_declared_huge_body_is_too_large_without_reading_it(http_client):
    async with serve(huge(64 * 1024 * 1024, declared=True)) as url:
        started = time.perf_counter()
        result = await measure_phases(client=http_client, url=url + "/metrics", limits=FAST)
    assert result.outcome == Outcome.TOO_LARGE
    assert time.perf_counter() - started < FAST.total_deadline_s + SLACK_S


async def test_an_unusable_url_is_an_error_result_not_an_exception(http_client):
    result = await measure_phases(client=http_client, url="ftp://127.0.0.1/x", limits=FAST)
    assert result.outcome == Outcome.ERROR
    assert "UnsupportedProtocol" in result.error


async def test_a_huge_error_page_is_still_a_bad_status(http_client):
    async def failing(request, writer):
        await respond(
            writer, 502, "<html>" + "x" * (2 * FAST.max_body_bytes) + "</html>", content_type="text/html"
        )

    async with serve(app({"GET /health": failing})) as url:
        result = await measure_phases(client=http_client, url=url + "/health", limits=FAST)
    assert (result.outcome, result.status) == (Outcome.BAD_STATUS, 502)
    assert result.body_bytes <= 64 * 1024
