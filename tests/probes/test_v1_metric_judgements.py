"""The judgements of vLLM's newer metrics (docs/vllm-metrics-judgements.md): a sleeping engine
is not down and pages nobody; requests deferred are not overload; a prefix-cache hit rate
collapsing against the instance's usual rate; speculative decoding that costs more than it
saves; LoRA adapters starving for a slot. Each fires where it should and not elsewhere."""

import pytest

from fleet.probes.classify import classify, next_state
from fleet.probes.findings import Thresholds
from fleet.probes.judgement import (
    PREFIX_KEY,
    PREFIX_MIN_SAMPLES,
    PREFIX_RELEARN_AFTER,
    judge,
    updated_prefix_baselines,
)
from fleet.probes.metric_rules import metric_findings, spec_decode_speedup
from fleet.probes.outcomes import Outcome
from fleet.probes.parts import ProbeParts
from fleet.probes.scrape import ScrapeResult
from fleet.probes.streaming import StreamResult
from tests.probes.engines import make_target
from tests.probes.test_classify import failed, phases, ready

TARGET = make_target("http://10.0.0.5:8000", max_num_seqs=256)
TH = Thresholds()
NO_FIRST_TOKEN = StreamResult(outcome=Outcome.READ_TIMEOUT, error="ReadTimeout after 10 s")
TIMED_OUT = phases(outcome=Outcome.READ_TIMEOUT, ttfb_s=None, total_s=None, error="ReadTimeout")
# An engine put to sleep (level 1) with requests that arrived since: nothing generated.
ASLEEP = {
    "engine_sleep_level": 1.0,
    "num_requests_running": 0.0,
    "num_requests_waiting": 4.0,
    "generation_tokens_per_s": 0.0,
    "prompt_tokens_per_s": 0.0,
    "engine_steps_per_s": 0.0,
    "scheduled_tokens_per_s": 0.0,
    "kv_cache_usage": 0.0,
    "window_s": 15.0,
}


def judged(*, derived, baselines=None, fresh=frozenset({"metrics", "health", "stream"}), info=None, **parts):
    values = {"readiness": ready(), "derived": derived} | parts
    if info is not None:
        values["scrape_result"] = ScrapeResult(outcome=Outcome.OK, info=info)
    return judge(target=TARGET, parts=ProbeParts(**values), thresholds=TH, baselines=baselines, fresh=fresh)


def by_code(judgement) -> dict:
    return {f.code: f for f in judgement.classification.findings}


def rules(derived, info=None) -> dict:
    return {f.code: f for f in metric_findings(derived, TARGET, TH, info=info)}


# A sleeping engine ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "meaning"),
    [(1, "weights offloaded to CPU memory, KV cache discarded"), (2, "weights and KV cache discarded")],
)
def test_a_sleeping_engine_is_said_with_its_level(level, meaning):
    found = rules({"engine_sleep_level": float(level)})["engine.asleep"]
    assert (found.category, found.severity) == ("process.asleep", "info")
    assert found.evidence.startswith(f"Asleep (level {level}: {meaning})")


def test_an_awake_engine_is_not_said_to_sleep():
    assert "engine.asleep" not in rules({"engine_sleep_level": 0.0})
    assert "engine.asleep" not in rules({"num_requests_running": 3.0})


def test_a_sleeping_engine_generating_nothing_is_not_down_and_pages_nobody():
    result = judged(derived=ASLEEP, stream=NO_FIRST_TOKEN, phases=TIMED_OUT)
    found = by_code(result)
    assert result.classification.verdict == "up"
    assert "engine.hung" not in found
    assert found["engine.asleep"].severity == "info"
    # what the paused generation caused is kept, as information, saying why
    assert found["stream.no_first_token"].severity == "info"
    assert found["stream.no_first_token"].evidence.endswith(
        "(not judged: the engine is asleep, so generation is paused)"
    )
    assert found["phases.timeout"].severity == "info"
    step = next_state(previous_state="up", failures={}, classification=result.classification, thresholds=TH)
    assert (step.verdict, step.failures) == ("up", {})


def test_the_same_standstill_awake_is_a_hung_engine():
    awake = ASLEEP | {"engine_sleep_level": 0.0}
    result = judged(derived=awake, stream=NO_FIRST_TOKEN, phases=TIMED_OUT)
    assert result.classification.verdict == "down"
    assert by_code(result)["engine.hung"].severity == "down"


def test_a_sleeping_engine_whose_server_fails_its_health_check_is_still_down():
    dead = failed(Outcome.READ_TIMEOUT, elapsed=5.0)
    result = judged(derived=ASLEEP, readiness=dead)
    assert result.classification.verdict == "down"
    assert by_code(result)["health.timeout"].severity == "down"


def test_requests_waiting_on_a_sleeping_engine_are_no_backlog():
    queued = ASLEEP | {"num_requests_waiting": 40.0}
    result = judged(derived=queued)
    assert result.classification.verdict == "up"
    assert by_code(result)["queue.backlog"].severity == "info"


def test_a_sleeping_engine_still_has_its_connection_findings_judged():
    slow = phases(method="GET", url="http://10.0.0.5:8000/health", connect_s=2.5)
    result = judged(derived=ASLEEP, phases=slow)
    assert by_code(result)["connect.slow"].severity == "degraded"


# Deferred requests ------------------------------------------------------------------------


def test_deferred_requests_are_not_a_backlog():
    found = rules({"num_requests_waiting": 32.0, "num_requests_waiting_capacity": 2.0,
                   "num_requests_waiting_deferred": 30.0})  # fmt: skip
    assert "queue.backlog" not in found
    deferred = found["queue.deferred"]
    assert (deferred.severity, deferred.category) == ("info", "rate_limit.queue")
    assert deferred.evidence.startswith("30 requests are deferred (held back by a transient constraint")
    assert "LoRA adapter budget" in deferred.evidence and "KV transfer" in deferred.evidence


def test_requests_waiting_for_capacity_are_a_backlog_whatever_else_is_deferred():
    found = rules({"num_requests_waiting": 25.0, "num_requests_waiting_capacity": 20.0,
                   "num_requests_waiting_deferred": 5.0})  # fmt: skip
    assert found["queue.backlog"].evidence == (
        "20 requests waiting for capacity > 10 (and 5 deferred), so a backlog"
    )


def test_without_the_by_reason_gauge_every_waiting_request_counts():
    found = rules({"num_requests_waiting": 25.0})
    assert found["queue.backlog"].evidence == "25 requests waiting > 10, so a backlog"
    assert "queue.deferred" not in found


def test_deferred_requests_do_not_make_a_full_kv_cache_pressure():
    deferred = {"kv_cache_usage": 0.97, "num_requests_waiting": 30.0, "num_requests_waiting_capacity": 1.0,
                "num_requests_waiting_deferred": 29.0}  # fmt: skip
    found = rules(deferred)
    assert "kv.pressure" not in found and found["kv.high"].severity == "info"
    assert "kv.pressure" in rules(deferred | {"num_requests_waiting_capacity": 12.0})


def test_deferred_requests_on_an_idle_engine_are_not_a_hang():
    """Requests waiting for a KV transfer from a prefill node: the decode engine has
    nothing to step, and is not hung."""
    waiting = ASLEEP | {"engine_sleep_level": 0.0, "num_requests_waiting_capacity": 0.0,
                        "num_requests_waiting_deferred": 4.0}  # fmt: skip
    result = judged(derived=waiting)
    assert "engine.hung" not in by_code(result)
    assert result.classification.verdict == "up"


# Prefix-cache collapse -------------------------------------------------------------------

USUAL_PREFIX = {PREFIX_KEY: 0.62, f"{PREFIX_KEY}_n": PREFIX_MIN_SAMPLES + 2, f"{PREFIX_KEY}_low": 0}


def prefix_window(rate: float, queried_per_s: float = 2000.0) -> dict[str, float]:
    return {
        "prefix_cache_hit_rate": rate,
        "prefix_cache_queries_per_s": queried_per_s,
        "prefix_cache_hits_per_s": rate * queried_per_s,
        "window_s": 15.0,
    }


def test_a_hit_rate_far_below_the_usual_one_while_prompts_continue_is_a_collapse():
    result = judged(derived=prefix_window(0.08), baselines=USUAL_PREFIX)
    collapse = by_code(result)["prefix_cache.collapse"]
    assert (collapse.category, collapse.severity, collapse.source) == (
        "routing.prefix_cache",
        "degraded",
        "metrics",
    )
    assert collapse.evidence.startswith(
        "Prefix-cache hit rate 8% over the last 15 s against a usual 62% (below 25% of it) with "
        "30000 prompt tokens looked up"
    )
    assert "routing change" in collapse.evidence
    assert result.classification.verdict == "degraded"
    assert result.baselines[f"{PREFIX_KEY}_low"] == 1 and result.baselines[PREFIX_KEY] == 0.62


def test_a_lower_but_not_collapsed_hit_rate_is_learnt():
    result = judged(derived=prefix_window(0.4), baselines=USUAL_PREFIX)
    assert "prefix_cache.collapse" not in by_code(result)
    assert result.baselines[PREFIX_KEY] == pytest.approx(0.8 * 0.62 + 0.2 * 0.4, abs=1e-4)


@pytest.mark.parametrize(
    ("derived", "baselines"),
    [
        (prefix_window(0.08, queried_per_s=50.0), USUAL_PREFIX),  # a trickle of prompts: nothing to say
        (prefix_window(0.02), USUAL_PREFIX | {PREFIX_KEY: 0.1}),  # a cache that hit little
        (prefix_window(0.08), USUAL_PREFIX | {f"{PREFIX_KEY}_n": 1}),  # the usual rate not learnt yet
        (prefix_window(0.08) | {"engine_sleep_level": 2.0}, USUAL_PREFIX),  # asleep
        ({"prefix_cache_hit_rate": 0.01}, USUAL_PREFIX),  # SGLang's gauge: no queries counted
    ],
)
def test_no_collapse_is_judged_without_enough_to_go_on(derived, baselines):
    assert "prefix_cache.collapse" not in by_code(judged(derived=derived, baselines=baselines))


def test_a_collapse_that_lasts_becomes_the_new_normal():
    baselines = dict(USUAL_PREFIX)
    for _ in range(PREFIX_RELEARN_AFTER):
        result = judged(derived=prefix_window(0.05), baselines=baselines)
        assert "prefix_cache.collapse" in by_code(result)
        baselines = result.baselines
    last = judged(derived=prefix_window(0.05), baselines=baselines)
    assert "prefix_cache.collapse" not in by_code(last)
    assert last.baselines[PREFIX_KEY] == 0.05 and last.baselines[f"{PREFIX_KEY}_n"] == 1


def test_a_stored_window_neither_moves_the_usual_rate_nor_counts_again():
    result = judged(derived=prefix_window(0.08), baselines=USUAL_PREFIX, fresh=frozenset({"health"}))
    assert "prefix_cache.collapse" in by_code(result)
    assert result.baselines is None


def test_updated_prefix_baselines_says_nothing_for_a_window_without_enough_prompts():
    assert updated_prefix_baselines(ProbeParts(derived=prefix_window(0.5, queried_per_s=1.0)), {}) is None
    first = updated_prefix_baselines(ProbeParts(derived=prefix_window(0.5)), {})
    assert first == {PREFIX_KEY: 0.5, f"{PREFIX_KEY}_n": 1, f"{PREFIX_KEY}_low": 0}


# Speculative decoding --------------------------------------------------------------------


def spec_window(accepted_per_draft: float, draft_length: float = 5.0, drafts_per_s: float = 40.0) -> dict:
    return {
        "spec_decode_drafts_per_s": drafts_per_s,
        "spec_decode_draft_tokens_per_s": drafts_per_s * draft_length,
        "spec_decode_accepted_tokens_per_s": drafts_per_s * accepted_per_draft,
        "spec_decode_mean_accepted_tokens": accepted_per_draft,
        "spec_decode_mean_acceptance_length": 1 + accepted_per_draft,
        "spec_decode_acceptance_rate": accepted_per_draft / draft_length,
        "spec_decode_draft_length": draft_length,
        "window_s": 15.0,
    }


def test_speculative_decoding_that_accepts_too_little_costs_more_than_it_saves():
    found = rules(spec_window(0.3))["spec_decode.costly"]
    assert (found.category, found.severity) == ("config.spec_decode", "degraded")
    # 5 drafted tokens at 0.1 of a step each: a step costs 1.5 and yields 1.3 tokens
    assert found.evidence.startswith(
        "Speculative decoding accepts 0.30 of 5.0 drafted tokens per draft (6%, mean acceptance "
        "length 1.30): at 0.1 of a decode step per drafted token a step costs 1.50 and yields 1.30 "
        "tokens, about 0.87× the speed without it"
    )
    assert spec_decode_speedup(spec_window(0.3), TH) == pytest.approx(1.3 / 1.5)


@pytest.mark.parametrize(
    "window",
    [
        spec_window(2.4),  # 48 % accepted: 3.4 tokens for the cost of 1.5 steps
        spec_window(0.6),  # 12 %: 1.6 tokens for 1.5 steps still pays, barely
        spec_window(0.1, drafts_per_s=2.0),  # 30 drafts in the window: too few to judge
        {"window_s": 15.0},  # no speculative decoding
    ],
)
def test_speculative_decoding_that_pays_or_is_too_little_seen_is_left_alone(window):
    assert "spec_decode.costly" not in rules(window)


def test_the_cost_per_drafted_token_is_a_threshold():
    cheap = Thresholds(spec_decode_token_cost=0.02)  # an n-gram draft costs next to nothing
    assert not [f for f in metric_findings(spec_window(0.3), TARGET, cheap) if f.code == "spec_decode.costly"]


# LoRA adapters ---------------------------------------------------------------------------

LORA = {"lora_max_adapters": 2.0, "lora_running_adapters": 2.0, "lora_waiting_adapters": 2.0,
        "lora_starved_adapters": 1.0, "num_requests_waiting": 6.0}  # fmt: skip
LORA_NAMES = {
    "lora_running": "sql-lora,chat-lora",
    "lora_waiting": "chat-lora,law-lora",
    "lora_starved": "law-lora",
}


def test_adapters_waiting_while_every_slot_is_busy_starve():
    found = rules(LORA, LORA_NAMES)["lora.starving"]
    assert (found.category, found.severity) == ("rate_limit.lora_slots", "degraded")
    assert found.evidence.startswith(
        "Every LoRA slot (--max-loras 2) is taken by running adapters (sql-lora,chat-lora) while "
        "adapters with requests waiting get none (law-lora), with 6 requests waiting"
    )


def test_adapters_waiting_with_none_running_starve():
    nothing_runs = LORA | {"lora_running_adapters": 0.0, "lora_starved_adapters": 2.0}
    found = rules(nothing_runs, LORA_NAMES | {"lora_running": "", "lora_starved": "chat-lora,law-lora"})
    assert "no adapter is running" in found["lora.starving"].evidence
    assert "(chat-lora,law-lora)" in found["lora.starving"].evidence


@pytest.mark.parametrize(
    "derived",
    [
        LORA | {"lora_running_adapters": 1.0},  # a slot is free: the adapter loads next step
        LORA | {"num_requests_waiting": 0.0},  # nothing waits
        LORA | {"lora_starved_adapters": 0.0},  # every waiting adapter also runs
        {"num_requests_waiting": 6.0},  # no LoRA
    ],
)
def test_adapters_that_are_not_starving_are_left_alone(derived):
    assert "lora.starving" not in rules(derived, LORA_NAMES)


def test_the_adapter_names_come_from_the_stored_scrape_result():
    result = judged(derived=LORA, info=LORA_NAMES)
    assert "(law-lora)" in by_code(result)["lora.starving"].evidence
    without = judged(derived=LORA)  # a result stored before names were kept
    assert "get none (?)" in by_code(without)["lora.starving"].evidence


def test_classify_passes_the_scrape_info_to_the_rules():
    classification = classify(
        readiness=ready(), phases=None, stream=None, derived=LORA, gpus=None, target=TARGET, thresholds=TH,
        scrape=ScrapeResult(outcome=Outcome.OK, info=LORA_NAMES),
    )  # fmt: skip
    assert classification.verdict == "degraded"
    assert "(law-lora)" in {f.code: f for f in classification.findings}["lora.starving"].evidence
