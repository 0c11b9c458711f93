"""The continuous-batching engine on a stepped clock: batching, KV blocks, preemption, timing."""

from __future__ import annotations

from fleet.simulator.engine import RequestState
from fleet.simulator.spec import LoadProfile
from fleet.simulator.traffic import Traffic
from tests.simulator.conftest import engine_for


def _ttft(engine, clock, *, prompt_tokens: int, ahead: int = 0) -> float:
    for _ in range(ahead):
        engine.submit(prompt_tokens=prompt_tokens, max_tokens=8, arrival=clock.now)
    req = engine.submit(prompt_tokens=prompt_tokens, max_tokens=8, arrival=clock.now)
    clock.run_until(engine, lambda: req.first_token_at is not None)
    return req.first_token_at - req.arrival


def test_a_lone_request_gets_its_first_token_after_prefill_then_one_token_per_step(clock):
    engine = engine_for()
    req = engine.submit(prompt_tokens=500, max_tokens=20, arrival=0.0)
    clock.run_until(engine, lambda: req.done)
    assert req.state is RequestState.FINISHED and req.finish_reason == "length"
    assert req.output_tokens == 20 == engine.stats.generation_tokens
    assert 0.005 < req.first_token_at < 0.1
    per_token = (req.finished_at - req.first_token_at) / 19
    assert 0.005 < per_token < 0.02  # an 8B model on an H100 decodes at ~9 ms a step


def test_a_request_that_stops_before_max_tokens_ends_with_stop(clock):
    engine = engine_for()
    req = engine.submit(prompt_tokens=50, max_tokens=100, target_tokens=12, arrival=0.0)
    clock.run_until(engine, lambda: req.done)
    assert (req.output_tokens, req.finish_reason) == (12, "stop")


def test_running_never_exceeds_max_num_seqs_and_the_rest_wait(clock):
    engine = engine_for(max_num_seqs=4)
    reqs = [engine.submit(prompt_tokens=100, max_tokens=50, arrival=0.0) for _ in range(10)]
    peak = 0
    while not all(r.done for r in reqs):
        clock.run(engine, seconds=0.01)
        peak = max(peak, engine.num_running)
        assert engine.num_running + engine.num_waiting == sum(not r.done for r in reqs)
    assert peak == 4
    assert all(r.finish_reason == "length" for r in reqs)


def test_the_newest_running_request_is_preempted_when_kv_blocks_run_out(clock):
    # 64 blocks of 16 tokens = 1,024 tokens of KV: three 300-token prompts fit, not their answers.
    engine = engine_for(num_gpu_blocks=64, max_model_len=1024)
    reqs = [engine.submit(prompt_tokens=300, max_tokens=200, arrival=0.0) for _ in range(3)]
    clock.run_until(engine, lambda: engine.stats.num_preemptions > 0)
    newest = reqs[-1]
    assert newest.preemptions == 1 and newest.state is RequestState.WAITING
    assert reqs[0].preemptions == 0 and reqs[0].state is RequestState.RUNNING
    clock.run_until(engine, lambda: all(r.done for r in reqs))
    # Not an out-of-memory error: everything finishes, later, and the pool is whole again.
    assert [r.finish_reason for r in reqs] == ["length"] * 3
    assert engine.pool.used == 0
    assert engine.stats.generation_tokens == 600


def test_ttft_grows_roughly_linearly_with_prompt_length(clock):
    short = _ttft(engine_for(), clock, prompt_tokens=1024)
    long = _ttft(engine_for(), clock, prompt_tokens=16384)
    very_long = _ttft(engine_for(), clock, prompt_tokens=32000)
    assert 12 < long / short < 20  # about linear, not 256x (corrections #12)
    assert very_long / long > 2.0  # the quadratic part shows only for very long prompts


def test_ttft_grows_with_the_number_of_requests_waiting_ahead(clock):
    alone = _ttft(engine_for(), clock, prompt_tokens=4000)
    behind_twenty = _ttft(engine_for(), clock, prompt_tokens=4000, ahead=20)
    assert behind_twenty > 5 * alone


def test_decode_tokens_per_second_per_sequence_falls_as_the_batch_grows(clock):
    def per_sequence_tokens_per_s(batch: int) -> float:
        engine = engine_for()
        reqs = [engine.submit(prompt_tokens=2000, max_tokens=200, arrival=0.0) for _ in range(batch)]
        clock.run_until(engine, lambda: all(r.done for r in reqs))
        return 199 / (reqs[0].finished_at - reqs[0].first_token_at)

    speeds = [per_sequence_tokens_per_s(b) for b in (1, 16, 128)]
    assert speeds[0] > speeds[1] > speeds[2]
    assert speeds[2] < 0.5 * speeds[0]


def test_a_client_that_gives_up_aborts_its_request(clock):
    engine = engine_for(max_num_seqs=1)
    first = engine.submit(prompt_tokens=100, max_tokens=500, arrival=0.0)
    impatient = engine.submit(prompt_tokens=100, max_tokens=10, arrival=0.0, deadline=0.5)
    clock.run_until(engine, lambda: impatient.done)
    assert impatient.finish_reason == "abort" and impatient.first_token_at is None
    assert engine.stats.finished["abort"] == 1
    assert engine.stats.queue_time.count == 0  # it never reached a first token
    clock.run_until(engine, lambda: first.done)


def test_counters_stay_consistent_with_the_requests_served(clock):
    engine = engine_for(num_gpu_blocks=400, max_num_seqs=32)
    traffic = Traffic(engine=engine, max_model_len=32768, seed=7, now=0.0)
    traffic.set_stream(
        LoadProfile(requests_per_s=40, mean_prompt_tokens=400, mean_output_tokens=60, timeout_s=3), now=0.0
    )
    finished = []
    traffic.on_finish = finished.append
    for _ in range(400):
        clock.now += 0.025
        traffic.generate(clock.now)
        engine.advance(clock.now)
    traffic.set_stream(LoadProfile(requests_per_s=0), now=clock.now)
    clock.run_until(engine, lambda: not engine.running and not engine.waiting)
    stats = engine.stats
    assert stats.num_preemptions > 0 and stats.finished["abort"] > 0  # a stressed engine
    assert stats.finished_total == len(finished) == stats.e2e_latency.count == stats.requests_received
    assert stats.generation_tokens == sum(r.output_tokens for r in finished) == stats.generation_len.sum
    started = [r for r in finished if r.first_token_at is not None]
    assert stats.prompt_tokens == sum(r.prompt_tokens for r in started)
    assert stats.time_to_first_token.count == len(started) == stats.queue_time.count
    assert stats.inter_token_latency.count == sum(r.output_tokens - 1 for r in started)
    assert engine.pool.used == 0


def test_prefix_cache_hits_are_counted_in_tokens_and_skip_prefill(clock):
    cached_engine, cold_engine = engine_for(), engine_for()
    hit = cached_engine.submit(prompt_tokens=8000, max_tokens=4, cached_tokens=6000, arrival=0.0)
    cold = cold_engine.submit(prompt_tokens=8000, max_tokens=4, arrival=0.0)
    clock.run_until(cached_engine, lambda: hit.done)
    clock.run_until(cold_engine, lambda: cold.done)
    assert cached_engine.stats.prefix_hits_tokens == 6000 - 6000 % 16
    assert cached_engine.stats.prefix_queries_tokens == 8000
    assert hit.first_token_at - hit.arrival < 0.5 * (cold.first_token_at - cold.arrival)


def test_a_stalled_engine_makes_no_progress_and_a_dead_one_fails_its_requests(clock):
    engine = engine_for()
    req = engine.submit(prompt_tokens=100, max_tokens=50, arrival=0.0)
    engine.knobs.stalled = True
    clock.run(engine, seconds=1.0)
    assert req.output_tokens == 0 and engine.num_waiting == 1
    engine.knobs.dead = True
    engine.fail_all()
    assert req.state is RequestState.FAILED
    assert engine.stats.finished_total == 0  # a dead engine reports nothing
