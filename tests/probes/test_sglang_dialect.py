"""SGLang's dialect: its routes, bodies and words, and probes of simulated SGLang instances."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from fleet.probes.classify import Thresholds
from fleet.probes.engines import DIALECTS, dialect_for
from fleet.probes.engines.sglang import SglangDialect, server_args_from_info
from fleet.probes.fetch import make_instance_client
from fleet.probes.instance_probe import phases_request, probe_instance
from fleet.probes.judgement import judge
from fleet.probes.outcomes import Outcome
from fleet.probes.target import ProbeLimits, ProbeTarget
from fleet.simulator import sglang_server
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.spec import InstanceSpec, LoadProfile
from tests.probes.engines import make_target

MODEL = "Qwen/Qwen3-8B"
LIMITS = ProbeLimits(connect_timeout_s=1, read_timeout_s=3, total_deadline_s=5, stream_deadline_s=6)
# What findings about another engine say, and SGLang's never may.
FOREIGN_WORDS = ("vLLM", "--max-num-queued-reqs", "--disable-log-stats", "VLLM_", "TGI", "text-generation",
                 "--max-concurrent-requests", "Ollama", "OLLAMA_")  # fmt: skip
WORDING = (
    "refused",
    "refused_while_gpu_held",
    "who_sent_429",
    "why_503",
    "dead_health_note",
    "no_metric_series",
)


def test_the_registry_gives_sglang_its_own_dialect():
    dialect = dialect_for("sglang")
    assert isinstance(dialect, SglangDialect) and DIALECTS["sglang"] is dialect
    assert (dialect.label, dialect.health_path, dialect.metric_prefix, dialect.has_metrics) == (
        "SGLang",
        "/health",
        "sglang:",
        True,
    )
    assert [r.path for r in dialect.readiness_routes] == ["/health", "/v1/models", "/get_server_info"]
    assert dialect.informative_paths == frozenset({"/get_server_info"})
    assert [r.auth for r in dialect.readiness_routes] == [False, True, True]


def test_the_phases_time_a_one_token_chat_completion_and_a_light_sweep_times_health():
    target = make_target("http://h:1", "sglang", served_model_name="m")
    path, body = dialect_for("sglang").one_token_request(target)
    assert path == "/v1/chat/completions"
    assert body | {"model": "m", "max_tokens": 1, "temperature": 0, "stream": False} == body
    light = phases_request(target, generate=False)
    assert (light["url"], light["method"]) == ("http://h:1/health", "GET")
    stream = dialect_for("sglang").stream_body(target, 8)
    assert (stream["stream"], stream["max_tokens"], stream["stream_options"]) == (
        True,
        8,
        {"include_usage": True},
    )


@pytest.mark.parametrize(
    ("version", "status"), [("0.4.10", None), ("0.4.10.post2", 503), ("0.5.10", 503), ("", 503)]
)
def test_health_reads_a_dead_scheduler_as_503_from_0_4_10_post2(version, status):
    assert dialect_for("sglang").dead_health_status(version) == status


def test_sglang_is_never_explained_in_another_engine_s_words():
    dialect = dialect_for("sglang")
    texts = [getattr(dialect, name) for name in WORDING]
    assert [t for t in texts if any(word in t for word in FOREIGN_WORDS)] == []


def test_the_stream_chunks_read_as_openai_ones():
    parse = dialect_for("sglang").parse_event
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    token = {"choices": [{"index": 0, "delta": {"role": None, "content": "ok"}, "finish_reason": None}]}
    finish = {"choices": [{"index": 0, "delta": {"role": None, "content": None}, "finish_reason": "length"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}}
    aborted = {
        "error": {"object": "error", "message": "Generation aborted.", "type": "INTERNAL_SERVER_ERROR"}
    }
    assert (parse(role).token, parse(token).token, parse(token).content) == (False, True, "ok")
    assert parse(finish).finish_reason == "length"
    assert (parse(usage).prompt_tokens, parse(usage).completion_tokens) == (12, 3)
    assert "Generation aborted." in parse(aborted).error


def test_server_args_are_read_without_the_api_key():
    info = {
        "model_path": MODEL,
        "tp_size": 2,
        "mem_fraction_static": 0.85,
        "api_key": "s3cret",
        "max_total_num_tokens": 500000,
        "internal_states": [{"effective_max_running_requests_per_dp": 48}],
        "version": "0.5.10",
    }
    args = server_args_from_info(info)
    assert "api_key" not in args and args["tp_size"] == 2 and args["max_total_num_tokens"] == 500000
    assert args["effective_max_running_requests"] == 48


# -- against the simulator ------------------------------------------------------------------


def _spec(name: str, seed: int) -> InstanceSpec:
    return InstanceSpec(
        name=name,
        engine="sglang",
        served_model_name=MODEL,
        max_model_len=8192,
        load=LoadProfile(requests_per_s=0.0),
        seed=seed,
    )


def _target(url: str, index: int) -> ProbeTarget:
    return make_target(url, "sglang", instance_id=index, served_model_name=MODEL, max_num_seqs=None)


async def _probe(targets: dict[str, ProbeTarget]):
    async def one(target: ProbeTarget):
        async with make_instance_client(limits=LIMITS) as client:
            return await probe_instance(client=client, target=target, previous_scrape=None, limits=LIMITS)

    results = await asyncio.gather(*(one(t) for t in targets.values()))
    return dict(zip(targets, results, strict=True))


CASES = ("healthy", "stopped", "crashed", "stuck")


@pytest.fixture(scope="module")
def probed():
    """One simulated SGLang per case, probed once, concurrently. The stuck scheduler's
    health check gives up after 1 s (SGLANG_HEALTH_CHECK_TIMEOUT at 1), inside the probe's
    read timeout."""
    patch = pytest.MonkeyPatch()
    patch.setattr(sglang_server, "HEALTH_CHECK_TIMEOUT_S", 1.0)
    patch.setattr(sglang_server, "HEALTH_POLL_S", 0.25)
    try:
        with SimulatorThread([_spec(case, i) for i, case in enumerate(CASES)]) as sim:
            sim.inject("stopped", {"kind": "refuse_connections"})
            sim.inject("crashed", {"kind": "crash"})
            sim.inject("stuck", {"kind": "engine_stall"})
            for name in ("stopped", "crashed"):
                sim.wait_listening(name, listening=False)
            targets = {case: _target(sim.url(case), i) for i, case in enumerate(CASES)}
            info = httpx.get(sim.url("healthy") + "/get_server_info").json()
            yield asyncio.run(_probe(targets)), info
    finally:
        patch.undo()


def judged(probe):
    return judge(target=probe.target, parts=probe.parts, thresholds=Thresholds()).classification


def test_a_healthy_sglang_reads_up_with_its_models_and_version(probed):
    probes, _ = probed
    probe = probes["healthy"]
    classification = judged(probe)
    assert classification.verdict == "up", classification.findings
    readiness = probe.readiness
    assert (readiness.healthy, readiness.model_found, readiness.models, readiness.version) == (
        True,
        True,
        (MODEL,),
        "0.5.10",
    )
    assert [c.outcome for c in readiness.checks] == [Outcome.OK] * 3
    assert (probe.phases.outcome, probe.phases.status, probe.stream.outcome) == (Outcome.OK, 200, Outcome.OK)
    stream = probe.stream
    assert (stream.tokens_from, stream.token_events, stream.first_token_kind) == (
        "usage",
        stream.completion_tokens,
        "content",
    )
    assert probe.scrape_result.supported and probe.scrape_result.outcome == Outcome.OK
    assert not [f for f in classification.findings if any(w in f.evidence for w in FOREIGN_WORDS)]


def test_the_server_info_route_informs_the_server_args(probed):
    _, info = probed
    read = next(r for r in dialect_for("sglang").readiness_routes if r.path == "/get_server_info").read
    found = read(json.loads(json.dumps(info)))
    assert found["version"] == "0.5.10"
    args = found["server_args"]
    assert (args["model_path"], args["tp_size"], args["context_length"], args["page_size"]) == (
        MODEL,
        1,
        8192,
        1,
    )
    assert args["max_total_num_tokens"] > 0 and "api_key" not in args


@pytest.mark.parametrize("case", ["stopped", "crashed"])
def test_a_stopped_sglang_is_not_up_and_says_why_in_sglang_s_words(probed, case):
    probes, _ = probed
    classification = judged(probes[case])
    assert classification.verdict != "up"
    refused = next(f for f in classification.findings if f.code == "connect.refused")
    assert refused.evidence.endswith(dialect_for("sglang").refused)


def test_a_stuck_scheduler_fails_sglang_s_health_check(probed):
    probes, _ = probed
    probe = probes["stuck"]
    assert (probe.readiness.healthy, probe.readiness.engine_dead) == (False, True)
    assert probe.readiness.checks[0].status == 503
    assert judged(probe).verdict == "down"


def test_a_stuck_scheduler_slower_than_the_probe_is_named_as_sglang_s_scheduler_not_a_hung_server(
    monkeypatch,
):
    """With SGLang's own 20 s health timeout the probe (3 s) gives up first: the finding says
    what a silent /health means for SGLang (its /health runs a generation)."""
    monkeypatch.setattr(sglang_server, "HEALTH_CHECK_TIMEOUT_S", 20.0)  # the module fixture shortens it
    with SimulatorThread([_spec("stuck-long", 9)]) as sim:
        sim.inject("stuck-long", {"kind": "engine_stall"})
        probes = asyncio.run(_probe({"stuck-long": _target(sim.url("stuck-long"), 9)}))
    classification = judged(probes["stuck-long"])
    timeout = next(f for f in classification.findings if f.code == "health.timeout")
    assert classification.verdict == "down"
    assert timeout.evidence.endswith(dialect_for("sglang").hung_health_meaning)
    assert "the API server is hung" not in timeout.evidence


# -- the inventory ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_inventory_takes_an_sglang_instance_that_is_probed_and_simulated_as_sglang(cast):
    from rest_framework.test import APIClient

    from fleet.forms import InstanceForm
    from fleet.models import Instance
    from fleet.probe_service import target_for
    from fleet.simulator.spec import specs_from_inventory
    from tests.factories import make_host

    make_host(name="node-s", address="10.1.0.9")
    client = APIClient()
    client.force_login(cast.for_role("sre"))
    payload = {
        "name": "sglang-a",
        "host": "node-s",
        "engine": "sglang",
        "engine_version": "0.5.10",
        "base_url": "http://127.0.0.1:30000",
        "served_model_name": MODEL,
    }
    created = client.post("/api/instances/", payload, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["engine"] == "sglang"
    assert [row["name"] for row in client.get("/api/instances/?engine=sglang").json()["results"]] == [
        "sglang-a"
    ]
    instance = Instance.objects.get(name="sglang-a")
    assert instance.get_engine_display() == "SGLang"
    assert ("sglang", "SGLang") in InstanceForm().fields["engine"].choices
    target = target_for(instance)
    assert target.engine == "sglang" and isinstance(dialect_for(target.engine), SglangDialect)
    (spec,) = [s for s in specs_from_inventory() if s.name == "sglang-a"]
    assert (spec.engine, spec.version, spec.port) == ("sglang", "0.5.10", 30000)
