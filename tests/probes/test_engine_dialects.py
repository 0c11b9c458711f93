"""Each engine is probed and explained in its own dialect, never in another engine's.

The registry gives each engine its dialect (and vLLM's, the OpenAI-compatible one, to an
engine it does not know); each dialect names its health route and the one-token request
the phases are timed on. Over real sockets, one simulated instance per engine and fault
(a refused port, a 429 from a gateway, a 503, a dead health route, a hung server) is
probed and judged the way the scheduled cycle does: its findings name what is true of its
engine, and no finding of an Ollama or TGI instance mentions vLLM or its flags (nor the
other way round). A healthy instance of each engine reads up.
"""

from __future__ import annotations

import asyncio

import pytest

from fleet.nvml.base import GpuProcess
from fleet.probes.classify import Thresholds, classify
from fleet.probes.engines import DIALECTS, dialect_for
from fleet.probes.engines.ollama import OllamaDialect
from fleet.probes.engines.sglang import SglangDialect
from fleet.probes.engines.tgi import TgiDialect
from fleet.probes.engines.vllm import VllmDialect
from fleet.probes.fetch import make_instance_client
from fleet.probes.gpu import GpuProbeResult
from fleet.probes.instance_probe import phases_request, probe_instance
from fleet.probes.judgement import judge
from fleet.probes.outcomes import Outcome
from fleet.probes.readiness import ReadinessResult, RouteCheck
from fleet.probes.target import ProbeLimits, ProbeTarget
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.spec import InstanceSpec, LoadProfile
from tests.probes.engines import make_target
from tests.probes.gpus import gpu, reading

ENGINES = ("vllm", "tgi", "ollama")
MODELS = {"vllm": "Qwen/Qwen3-8B", "tgi": "mistralai/Mistral-7B-Instruct-v0.3", "ollama": "llama3.1:8b"}
# What each engine's findings may say and no other engine's may: its name and its flags.
OWN_WORDS = {
    "vllm": ("vLLM", "--max-num-queued-reqs", "--disable-log-stats", "VLLM_"),
    "tgi": ("TGI", "--max-concurrent-requests", "text-generation"),
    "ollama": ("Ollama", "OLLAMA_"),
    "sglang": ("SGLang", "--mem-fraction-static", "--max-queued-requests"),
}
GENERATION_PREFIX = {"vllm": "/v1/chat", "tgi": "/generate", "ollama": "/api/chat"}
LIMITS = ProbeLimits(connect_timeout_s=1, read_timeout_s=2, total_deadline_s=4, stream_deadline_s=6)


def foreign_words(engine: str) -> list[str]:
    return [word for other, words in OWN_WORDS.items() if other != engine for word in words]


def leaks(engine: str, findings) -> list[str]:
    """The findings whose evidence names another engine or its flags."""
    return [f.evidence for f in findings if any(word in f.evidence for word in foreign_words(engine))]


# -- the registry ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "dialect_class"),
    [("vllm", VllmDialect), ("tgi", TgiDialect), ("ollama", OllamaDialect), ("sglang", SglangDialect)],
)
def test_the_registry_gives_each_engine_its_own_dialect(engine, dialect_class):
    dialect = dialect_for(engine)
    assert isinstance(dialect, dialect_class) and dialect.name == engine
    assert DIALECTS[engine] is dialect


def test_an_engine_the_registry_does_not_know_gets_the_openai_compatible_vllm_dialect():
    assert dialect_for("lmdeploy") is DIALECTS["vllm"]
    assert "lmdeploy" not in DIALECTS  # readiness and the stream report it as unknown instead


@pytest.mark.parametrize(
    ("engine", "health_path"), [("vllm", "/health"), ("tgi", "/health"), ("ollama", "/api/version")]
)
def test_each_dialect_names_its_health_route_and_a_light_sweep_times_it(engine, health_path):
    assert dialect_for(engine).health_path == health_path
    request = phases_request(make_target("http://h:1", engine), generate=False)
    assert (request["url"], request["method"]) == (f"http://h:1{health_path}", "GET")


@pytest.mark.parametrize(
    ("engine", "path", "body"),
    [
        (
            "vllm",
            "/v1/chat/completions",
            {"model": "m", "max_tokens": 1, "temperature": 0, "stream": False},
        ),
        ("tgi", "/generate", {"parameters": {"max_new_tokens": 1}}),
        (
            "ollama",
            "/api/chat",
            {"model": "m", "stream": False, "options": {"num_predict": 1, "temperature": 0}},
        ),
    ],
)
def test_each_dialect_times_the_phases_on_a_one_token_request_on_its_native_route(engine, path, body):
    sent_path, sent = dialect_for(engine).one_token_request(
        make_target("http://h:1", engine, served_model_name="m")
    )
    assert sent_path == path
    assert sent | body == sent  # every field named here is sent as named


def test_only_vllm_and_tgi_export_metrics_each_under_its_own_prefix():
    assert [(e, dialect_for(e).has_metrics, dialect_for(e).metric_prefix) for e in ENGINES] == [
        ("vllm", True, "vllm:"),
        ("tgi", True, "tgi_"),
        ("ollama", False, ""),
    ]


@pytest.mark.parametrize(
    ("engine", "version", "status"),
    [
        ("vllm", "0.10.2", 500),
        ("vllm", "0.11.2", 503),
        ("vllm", "", 503),
        ("tgi", "3.3.4", 503),
        ("ollama", "0.12.3", None),
    ],
)
def test_each_dialect_knows_what_its_health_route_answers_once_the_engine_died(engine, version, status):
    assert dialect_for(engine).dead_health_status(version) == status


# -- wording, from the dialect -------------------------------------------------------------

WORDING = (
    "refused",
    "refused_while_gpu_held",
    "who_sent_429",
    "why_503",
    "dead_health_note",
    "no_metric_series",
)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_dialect_explains_its_engine_by_another_engine(engine):
    dialect = dialect_for(engine)
    texts = [getattr(dialect, name) for name in WORDING]
    assert [t for t in texts if any(word in t for word in foreign_words(engine))] == []


def _refused_with_gpu_held(engine: str) -> str:
    held = gpu(0, processes=(GpuProcess(pid=42, name="python", used_memory_mib=30000),))
    result = classify(
        readiness=ReadinessResult(
            outcome=Outcome.REFUSED, checks=(RouteCheck(path="/health", outcome=Outcome.REFUSED),)
        ),
        phases=None,
        stream=None,
        derived={},
        gpus=GpuProbeResult(outcome=Outcome.OK, reading=reading(held)),
        target=make_target("http://10.0.0.5:8000", engine),
        thresholds=Thresholds(),
        gpu_indices=[0],
    )
    (finding,) = result.findings
    assert finding.code == "connect.refused"
    return finding.evidence


@pytest.mark.parametrize("engine", ["vllm", "tgi"])
def test_a_refused_port_while_a_process_holds_the_gpu_is_a_vllm_or_tgi_still_loading(engine):
    assert _refused_with_gpu_held(engine).endswith("so the engine is probably still loading the model")


def test_a_refused_ollama_port_is_a_server_not_running_even_while_a_process_holds_the_gpu():
    evidence = _refused_with_gpu_held("ollama")
    assert "Ollama listens before it loads any model, so its server is not running" in evidence
    assert "loading the model" not in evidence


# -- over real sockets, against the simulator ----------------------------------------------

FAULTS = {
    "refused": lambda engine: {"kind": "refuse_connections"},
    "429": lambda engine: {"kind": "rate_limited", "paths": [GENERATION_PREFIX[engine]]},
    "503": lambda engine: {"kind": "http_503", "paths": [GENERATION_PREFIX[engine]]},
    "engine_dead": lambda engine: {"kind": "engine_dead"},
    "health_500": lambda engine: {"kind": "http_500", "paths": [dialect_for(engine).health_path]},
    "hung": lambda engine: {"kind": "hang"},
}
# The finding code each case must show, per engine.
EXPECTED = {
    "refused": dict.fromkeys(ENGINES, "connect.refused"),
    "429": dict.fromkeys(ENGINES, "http.429"),
    "503": dict.fromkeys(ENGINES, "http.503"),
    # Ollama has no dead-engine status: /api/version answers while the runner fails requests
    "engine_dead": {"vllm": "engine.dead", "tgi": "engine.dead", "ollama": "request.failed"},
    "health_500": dict.fromkeys(ENGINES, "health.http_500"),
    "hung": dict.fromkeys(ENGINES, "health.timeout"),
}
CASES = [(engine, case) for engine in ENGINES for case in (*FAULTS, "healthy")]


def _name(engine: str, case: str) -> str:
    return f"{engine}-{case}"


def _spec(engine: str, case: str, seed: int) -> InstanceSpec:
    return InstanceSpec(
        name=_name(engine, case),
        engine=engine,
        served_model_name=MODELS[engine],
        max_model_len=8192,
        load=LoadProfile(requests_per_s=0.0),
        seed=seed,
    )


def _target(engine: str, url: str, index: int) -> ProbeTarget:
    return make_target(url, engine, instance_id=index, served_model_name=MODELS[engine], max_num_seqs=None)


async def _probe_all(targets: dict[tuple[str, str], ProbeTarget]):
    async def probe(target: ProbeTarget):
        async with make_instance_client(limits=LIMITS) as client:
            return await probe_instance(client=client, target=target, previous_scrape=None, limits=LIMITS)

    probes = await asyncio.gather(*(probe(t) for t in targets.values()))
    return dict(zip(targets, probes, strict=True))


@pytest.fixture(scope="module")
def probed():
    """Every (engine, case) probed once, concurrently, with its fault active."""
    specs = [_spec(engine, case, seed) for seed, (engine, case) in enumerate(CASES)]
    with SimulatorThread(specs) as sim:
        targets = {
            (engine, case): _target(engine, sim.url(_name(engine, case)), index)
            for index, (engine, case) in enumerate(CASES)
        }
        for engine, case in CASES:
            if case in FAULTS:
                sim.inject(_name(engine, case), FAULTS[case](engine))
        for engine, case in CASES:
            if case == "refused":  # the port closes a moment after the fault: wait for it
                sim.wait_listening(_name(engine, case), listening=False)
        yield asyncio.run(_probe_all(targets))


def judged(probe):
    return judge(target=probe.target, parts=probe.parts, thresholds=Thresholds()).classification


FAULTED = [c for c in CASES if c[1] != "healthy"]


@pytest.mark.parametrize(("engine", "case"), FAULTED, ids=["-".join(c) for c in FAULTED])
def test_a_fault_is_explained_in_the_instance_s_own_engine_s_words(probed, engine, case):
    classification = judged(probed[engine, case])
    codes = [f.code for f in classification.findings]
    assert EXPECTED[case][engine] in codes, classification.findings
    assert leaks(engine, classification.findings) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_a_refused_port_says_what_a_refused_port_means_for_the_engine(probed, engine):
    finding = next(f for f in judged(probed[engine, "refused"]).findings if f.code == "connect.refused")
    assert finding.evidence.endswith(dialect_for(engine).refused)


@pytest.mark.parametrize(("engine", "case", "words"), [
    ("vllm", "429", "vLLM itself never answers 429"),
    ("tgi", "429", "TGI is overloaded (its --max-concurrent-requests)"),
    ("ollama", "429", "Ollama does not answer 429 itself"),
    ("vllm", "503", "--max-num-queued-reqs"),
    ("tgi", "503", "TGI is unhealthy"),
    ("ollama", "503", "Ollama's queue is full (OLLAMA_MAX_QUEUE)"),
])  # fmt: skip
def test_a_429_or_503_names_who_sends_it_to_that_engine(probed, engine, case, words):
    finding = next(f for f in judged(probed[engine, case]).findings if f.code == f"http.{case}")
    assert words in finding.evidence


def test_a_dead_engine_is_read_by_its_own_health_status(probed):
    vllm = next(f for f in judged(probed["vllm", "engine_dead"]).findings if f.code == "engine.dead")
    tgi = next(f for f in judged(probed["tgi", "engine_dead"]).findings if f.code == "engine.dead")
    assert (
        vllm.evidence
        == "/health returned 503: the engine is dead (vLLM answers 500 up to 0.10 and 503 from 0.11)"
    )
    assert (
        tgi.evidence
        == "/health returned 503: the engine is dead (TGI answers 503 once its shard fails the health check)"
    )
    assert "engine.dead" not in [f.code for f in judged(probed["ollama", "engine_dead"]).findings]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_healthy_instance_of_each_engine_reads_up_after_a_full_probe(probed, engine):
    probe = probed[engine, "healthy"]
    classification = judged(probe)
    assert classification.verdict == "up", classification.findings
    assert (probe.readiness.healthy, probe.readiness.model_found) == (True, True)
    assert (probe.phases.outcome, probe.phases.status, probe.stream.outcome) == (Outcome.OK, 200, Outcome.OK)
    assert probe.scrape_result.supported is dialect_for(engine).has_metrics
    assert leaks(engine, classification.findings) == []
