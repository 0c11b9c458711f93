"""What the V1 engine does behind the newer vLLM metrics, on a stepped clock: speculative
decoding, the LoRA budget and deferred requests, sleep mode, and where prompt tokens come
from. Each test is the behaviour a metric reports (docs/vllm-metrics.md)."""

from __future__ import annotations

from fleet.simulator.engine import EngineFeatures, RequestState
from fleet.simulator.engine_effects import features_for
from fleet.simulator.engine_stats import EXTERNAL_KV_TRANSFER, LOCAL_CACHE_HIT, LOCAL_COMPUTE
from fleet.simulator.faults import FaultBook, parse_fault
from fleet.simulator.spec import InstanceSpec
from tests.simulator.conftest import engine_for


def _decode_seconds(clock, *, spec_tokens: int, acceptance: float) -> float:
    engine = engine_for()
    engine.features = EngineFeatures(spec_tokens=spec_tokens, spec_acceptance=acceptance)
    req = engine.submit(prompt_tokens=200, max_tokens=300, arrival=clock.now)
    clock.run_until(engine, lambda: req.done)
    return req.finished_at - req.first_token_at


def test_speculative_decoding_emits_the_accepted_drafts_plus_one_token_per_step(clock):
    engine = engine_for()
    engine.features = EngineFeatures(spec_tokens=3, spec_acceptance=0.8)
    reqs = [engine.submit(prompt_tokens=100, max_tokens=400, arrival=0.0) for _ in range(4)]
    clock.run_until(engine, lambda: all(r.done for r in reqs))
    stats = engine.stats
    assert all(r.output_tokens == 400 for r in reqs)
    # A decode step drafts up to 3 tokens (none for a request's very last token) and emits
    # 1 + the accepted ones; the first token of each request comes from its prefill.
    undrafted = stats.generation_tokens - 4 - stats.spec_drafts - stats.spec_accepted_tokens
    assert 0 <= undrafted <= 4
    assert stats.spec_draft_tokens <= 3 * stats.spec_drafts
    # Accepted only after every earlier position was: each position accepts less often.
    first, second, third = stats.spec_accepted_per_pos
    assert stats.spec_drafts > first > second > third > 0
    assert sum(stats.spec_accepted_per_pos) == stats.spec_accepted_tokens
    assert 0.55 < stats.spec_accepted_tokens / stats.spec_draft_tokens < 0.75  # 0.8, 0.64, 0.51 over 3
    # iteration_tokens_total counts the drafted tokens a step verifies.
    assert stats.iteration_tokens.sum >= 4 * 100 + stats.spec_draft_tokens


def test_drafts_that_are_rarely_accepted_cost_more_than_they_save(clock):
    plain = _decode_seconds(clock, spec_tokens=0, acceptance=0.0)
    good = _decode_seconds(clock, spec_tokens=3, acceptance=0.8)
    bad = _decode_seconds(clock, spec_tokens=3, acceptance=0.05)
    assert good < plain / 2
    assert bad > plain  # every step drafts 3 tokens, and almost none is kept


def test_the_lora_budget_defers_requests_for_an_adapter_that_cannot_run_yet(clock):
    engine = engine_for()
    engine.features = EngineFeatures(lora_adapters=("sql", "chat"), max_loras=1)
    reqs = [engine.submit(prompt_tokens=100, max_tokens=50, arrival=0.0) for _ in range(6)]
    clock.run(engine, seconds=0.05)
    # Request ids 1..6 take the adapters in turn: chat, sql, chat, ... The first admitted
    # (chat) fills the budget of one adapter; sql's requests are passed over, not blocking.
    assert engine.running_adapters() == ["chat"]
    assert {r.state for r in reqs if r.id % 2} == {RequestState.RUNNING}
    assert engine.waiting_by_reason() == (0, 3)
    clock.run_until(engine, lambda: all(r.done for r in reqs))
    assert [r.finish_reason for r in reqs] == ["length"] * 6
    assert ("", "sql") in engine.stats.lora_info or ("sql", "") in engine.stats.lora_info


def test_starving_adapters_wait_as_deferred_with_none_running(clock):
    engine = engine_for()
    engine.features = EngineFeatures(lora_adapters=("sql", "chat"), max_loras=2, lora_starved=True)
    for _ in range(4):
        engine.submit(prompt_tokens=100, max_tokens=50, arrival=0.0)
    clock.run(engine, seconds=0.2)
    assert (engine.num_running, engine.waiting_by_reason()) == (0, (0, 4))
    newest = max(engine.stats.lora_info, key=engine.stats.lora_info.get)
    assert newest == ("", "chat,sql")  # (running, waiting)


def test_requests_held_for_a_kv_transfer_are_deferred_and_do_not_hold_up_the_queue(clock):
    engine = engine_for()
    engine.features = EngineFeatures(hold_deferred=3, hold_prompt_tokens=800, hold_output_tokens=10)
    clock.run(engine, seconds=0.01)
    assert engine.waiting_by_reason() == (0, 3)
    req = engine.submit(prompt_tokens=100, max_tokens=5, arrival=clock.now)
    clock.run_until(engine, lambda: req.done)
    assert engine.waiting_by_reason() == (0, 3)  # topped up and still held

    engine.features = EngineFeatures()  # the transfer completes
    clock.run_until(engine, lambda: engine.num_waiting == 0 and engine.num_running == 0)
    by_source = engine.stats.prompt_tokens_by_source
    assert by_source[EXTERNAL_KV_TRANSFER] == 3 * 799  # all but the last token, computed here
    assert engine.stats.prefix_queries_tokens == 100  # a transferred prompt is no local lookup


def test_prompt_tokens_by_source_add_up_to_the_prompt_tokens(clock):
    engine = engine_for(block_size=16)
    reqs = [
        engine.submit(prompt_tokens=500, max_tokens=4, cached_tokens=320, arrival=0.0),
        engine.submit(prompt_tokens=100, max_tokens=4, arrival=0.0),
    ]
    clock.run_until(engine, lambda: all(r.done for r in reqs))
    by_source = engine.stats.prompt_tokens_by_source
    assert (by_source[LOCAL_CACHE_HIT], by_source[LOCAL_COMPUTE], by_source[EXTERNAL_KV_TRANSFER]) == (
        320,
        280,
        0,
    )
    assert sum(by_source.values()) == engine.stats.prompt_tokens == 600
    assert engine.stats.prefix_hits_tokens == 320


def test_a_collapsed_prefix_cache_finds_a_fraction_of_the_usual_hits(clock):
    engine = engine_for()
    engine.features = EngineFeatures(prefix_hit_factor=0.0)
    req = engine.submit(prompt_tokens=500, max_tokens=4, cached_tokens=320, arrival=0.0)
    clock.run_until(engine, lambda: req.done)
    assert (engine.stats.prefix_queries_tokens, engine.stats.prefix_hits_tokens) == (500, 0)


def test_a_sleeping_engine_takes_no_step_and_gives_back_its_kv_cache(clock):
    engine = engine_for()
    running = engine.submit(prompt_tokens=300, max_tokens=500, arrival=0.0)
    clock.run_until(engine, lambda: running.output_tokens > 5)
    engine.sleep(1)
    assert (engine.sleep_level, engine.kv_usage, engine.num_running) == (1, 0.0, 0)
    assert running.state is RequestState.WAITING and engine.stats.num_preemptions == 0
    late = engine.submit(prompt_tokens=50, max_tokens=5, arrival=clock.now)
    emitted = running.output_tokens
    clock.run(engine, seconds=1.0)
    assert (running.output_tokens, late.state, engine.num_waiting) == (emitted, RequestState.WAITING, 2)

    engine.wake_up()
    clock.run_until(engine, lambda: running.done and late.done)
    assert (running.finish_reason, late.finish_reason) == ("length", "length")


def test_a_sleep_by_fault_outlasts_a_wake_up_call(clock):
    engine = engine_for()
    engine.sleep(2, by_fault=True)
    engine.wake_up()
    assert engine.sleep_level == 2
    engine.sleep(0, by_fault=True)
    assert engine.sleep_level == 0


def test_the_spec_and_the_faults_set_what_the_engine_runs_with():
    spec = InstanceSpec(
        name="m", num_speculative_tokens=4, spec_acceptance=0.7, lora_adapters=("a",), max_loras=2
    )
    assert features_for(spec, FaultBook()) == EngineFeatures(
        spec_tokens=4, spec_acceptance=0.7, lora_adapters=("a",), max_loras=2
    )
    faults = FaultBook()
    for fault in (
        {"kind": "spec_decode_low_acceptance"},
        {"kind": "prefix_cache_collapse", "keep": 0.1},
        {"kind": "waiting_deferred", "n": 7},
        {"kind": "lora_starving"},
    ):
        faults.add(parse_fault(fault, now=0.0))
    features = features_for(spec, faults)
    assert (features.spec_acceptance, features.prefix_hit_factor) == (0.05, 0.1)
    assert (features.hold_deferred, features.lora_starved) == (7, True)
    assert (
        features_for(InstanceSpec(name="t", engine="tgi", num_speculative_tokens=4), FaultBook()).spec_tokens
        == 0
    )
