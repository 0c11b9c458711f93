import time

import pytest

from fleet.probes.outcomes import Outcome
from fleet.probes.readiness import check_readiness
from tests.probes.engines import FAST, MODEL, SLACK_S, make_target, vllm_routes
from tests.probes.servers import app, closed_port_url, hang, respond, serve

pytestmark = pytest.mark.anyio


async def test_a_healthy_vllm_serving_the_model_is_ready(http_client):
    async with serve(app(vllm_routes())) as url:
        result = await check_readiness(client=http_client, target=make_target(url), limits=FAST)
    assert (result.outcome, result.healthy, result.engine_dead) == (Outcome.OK, True, False)
    assert (result.models, result.model_found, result.version) == ((MODEL,), True, "0.11.2")


async def test_it_reports_a_model_mismatch_with_the_ids_it_saw(http_client):
    async with serve(app(vllm_routes(models=("meta-llama/Llama-3.1-8B", "lora-a")))) as url:
        result = await check_readiness(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.OK
    assert result.model_mismatch
    assert result.models == ("meta-llama/Llama-3.1-8B", "lora-a")


@pytest.mark.parametrize("status", [500, 503])
async def test_health_500_or_503_means_the_engine_is_dead(http_client, status):
    routes = vllm_routes()

    async def dead(request, writer):
        await respond(writer, status)

    routes["GET /health"] = dead
    async with serve(app(routes)) as url:
        result = await check_readiness(client=http_client, target=make_target(url), limits=FAST)
    assert (result.outcome, result.healthy, result.engine_dead) == (Outcome.BAD_STATUS, False, True)


async def test_a_model_list_that_is_not_json_is_garbage(http_client):
    routes = vllm_routes()

    async def html(request, writer):
        await respond(writer, 200, "<html>login</html>", content_type="text/html")

    routes["GET /v1/models"] = html
    async with serve(app(routes)) as url:
        result = await check_readiness(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.GARBAGE
    assert result.healthy and result.model_found is None
    assert "not the expected JSON" in result.error


async def test_the_api_key_is_sent_to_the_model_list(http_client):
    seen = {}
    routes = vllm_routes()
    model_list = routes["GET /v1/models"]

    async def guarded(request, writer):
        seen["auth"] = request.headers.get("authorization")
        await model_list(request, writer)

    routes["GET /v1/models"] = guarded
    async with serve(app(routes)) as url:
        await check_readiness(client=http_client, target=make_target(url, api_key="sk-test"), limits=FAST)
    assert seen["auth"] == "Bearer sk-test"


async def test_tgi_is_ready_when_health_is_200_and_info_names_the_model(http_client):
    async def health(request, writer):
        await respond(writer, 200)

    async def info(request, writer):
        await respond(writer, 200, {"model_id": MODEL, "version": "3.3.4", "max_concurrent_requests": 128})

    async with serve(app({"GET /health": health, "GET /info": info})) as url:
        result = await check_readiness(client=http_client, target=make_target(url, "tgi"), limits=FAST)
    assert (result.outcome, result.model_found, result.version) == (Outcome.OK, True, "3.3.4")


async def test_ollama_matches_a_model_listed_with_its_latest_tag(http_client):
    async def version(request, writer):
        await respond(writer, 200, {"version": "0.12.6"})

    async def tags(request, writer):
        await respond(writer, 200, {"models": [{"name": "llama3:latest", "model": "llama3:latest"}]})

    async with serve(app({"GET /api/version": version, "GET /api/tags": tags})) as url:
        result = await check_readiness(
            client=http_client, target=make_target(url, "ollama", served_model_name="llama3"), limits=FAST
        )
    assert (result.outcome, result.healthy, result.model_found) == (Outcome.OK, True, True)


async def test_a_closed_port_is_refused(http_client):
    result = await check_readiness(client=http_client, target=make_target(closed_port_url()), limits=FAST)
    assert (result.outcome, result.healthy) == (Outcome.REFUSED, False)


async def test_a_hung_server_ends_within_the_deadline(http_client):
    async with serve(hang) as url:
        started = time.perf_counter()
        result = await check_readiness(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.READ_TIMEOUT
    assert time.perf_counter() - started < FAST.total_deadline_s + SLACK_S


async def test_an_unknown_engine_is_an_error_result():
    result = await check_readiness(client=None, target=make_target("http://x", "triton"), limits=FAST)
    assert (result.outcome, result.error) == (Outcome.ERROR, "unknown engine 'triton'")
