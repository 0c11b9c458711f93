"""The TTFT breakdown: the client's TTFT split into connect, TLS, gateway gap, queue, prefill
and the rest, the largest part named as the cause, and unmeasured parts said to be so."""

from __future__ import annotations

import math

import pytest

from core.i18n import Message
from fleet.probes.scrape import derive, parse_exposition
from fleet.probes.ttft_breakdown import (
    MEASURED,
    NOT_APPLICABLE,
    NOT_MEASURED,
    PART_KEYS,
    TtftInputs,
    cache_split,
    inputs_from_results,
    nice,
    split,
)


def english(message: Message | None) -> str:
    return str(message) if message is not None else ""


def test_the_largest_part_is_named_as_the_cause_in_one_sentence():
    breakdown = split(
        TtftInputs(ttft_s=6.1, connect_s=0.002, https=False, queue_s=4.8, prefill_s=1.1, window_s=30)
    )
    assert breakdown.cause == "queue"
    assert english(breakdown.sentence) == "TTFT 6.1 s: 4.8 s queued (waiting for capacity), 1.1 s prefill"
    assert [p.key for p in breakdown.parts] == list(PART_KEYS)
    queue, prefill, other = (breakdown.part(k) for k in ("queue", "prefill", "other"))
    assert queue.seconds == 4.8 and queue.percent == 79 and prefill.percent == 18
    assert other.seconds == pytest.approx(6.1 - 4.8 - 1.1 - 0.002)
    assert sum(p.share for p in breakdown.parts if p.share is not None) == pytest.approx(1.0)
    assert "over the last 30 s" in english(queue.note)


CAUSES = {
    "connect": (dict(connect_s=2.5, tls_s=2.7, https=True, queue_s=0.1), "TTFT 3 s: 2.5 s connecting (DNS"),
    "tls": (
        dict(connect_s=0.1, tls_s=2.6, https=True, queue_s=0.1),
        "TTFT 3 s: 2.5 s in the TLS handshake (",
    ),
    "prefill": (dict(queue_s=0.2, prefill_s=2.5), "TTFT 3 s: 2.5 s prefill (computing the prompt)"),
    "other": (dict(queue_s=0.5, prefill_s=0.5), "TTFT 3 s: 2 s not explained by the measured parts"),
}


@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_whichever_part_is_largest_is_the_cause(cause):
    fields, start = CAUSES[cause]
    breakdown = split(TtftInputs(ttft_s=3.0, **fields))
    assert breakdown.cause == cause
    assert english(breakdown.sentence).startswith(start)


def test_parts_below_a_tenth_are_left_out_of_the_sentence_but_kept_in_the_parts():
    breakdown = split(TtftInputs(ttft_s=5.0, connect_s=0.05, https=False, queue_s=4.0, prefill_s=0.3))
    assert english(breakdown.sentence) == "TTFT 5 s: 4 s queued (waiting for capacity), 0.65 s other"
    assert breakdown.part("prefill").seconds == 0.3 and breakdown.part("connect").seconds == 0.05


def test_tls_is_the_handshake_alone_and_plain_http_has_none():
    tls = split(TtftInputs(ttft_s=1.0, connect_s=0.2, tls_s=0.5, https=True)).part("tls")
    assert tls.status == MEASURED and tls.seconds == pytest.approx(0.3)
    plain = split(TtftInputs(ttft_s=1.0, connect_s=0.2, https=False)).part("tls")
    assert plain.status == NOT_APPLICABLE and plain.seconds is None and "plain HTTP" in english(plain.note)
    reused = split(TtftInputs(ttft_s=1.0, reused_connection=True, https=True))
    assert reused.part("connect").seconds == 0.0 and reused.part("tls").seconds == 0.0
    assert "reused" in english(reused.part("connect").note)


def test_the_gateway_gap_is_the_ttfb_through_the_gateway_minus_the_ttfb_direct():
    timings = {"gateway_ttfb_s": 1.6, "direct_ttfb_s": 0.4}
    breakdown = split(TtftInputs(ttft_s=2.0, gateway="edge-gw", ttft_through_gateway=True, **timings))
    gap = breakdown.part("gateway")
    assert gap.status == MEASURED and gap.seconds == pytest.approx(1.2)
    assert breakdown.cause == "gateway" and breakdown.total_s == 2.0
    assert english(breakdown.sentence).startswith(
        "TTFT 2 s: 1.2 s in the gateway (more than calling the engine directly)"
    )
    assert english(gap.note) == "TTFB 1.6 s through edge-gw − 0.4 s straight to the engine"


def test_a_gateway_no_slower_than_direct_has_no_gap():
    gap = split(TtftInputs(ttft_s=1.0, gateway="gw", gateway_ttfb_s=0.3, direct_ttfb_s=0.5)).part("gateway")
    assert gap.status == MEASURED and gap.seconds == 0.0


def test_a_gap_measured_beside_a_direct_stream_probe_is_added_to_what_is_split():
    breakdown = split(TtftInputs(ttft_s=1.0, gateway="gw", gateway_ttfb_s=2.0, direct_ttfb_s=0.5))
    assert breakdown.ttft_s == 1.0 and breakdown.total_s == pytest.approx(2.5)
    assert english(breakdown.sentence).startswith("TTFT 2.5 s: 1.5 s in the gateway")
    assert any("straight to the engine" in english(n) for n in breakdown.notes)


def test_a_gateway_without_timings_is_not_measured_and_no_gateway_is_not_applicable():
    probed_direct = split(TtftInputs(ttft_s=1.0, gateway="edge-gw")).part("gateway")
    assert probed_direct.status == NOT_MEASURED and "edge-gw" in english(probed_direct.note)
    through = split(TtftInputs(ttft_s=1.0, gateway="edge-gw", ttft_through_gateway=True)).part("gateway")
    assert through.status == NOT_MEASURED and "no direct TTFB" in english(through.note)
    assert split(TtftInputs(ttft_s=1.0)).part("gateway").status == NOT_APPLICABLE


def test_the_cache_split_prefers_prompt_tokens_by_source_and_counts_tokens_per_request():
    inputs = TtftInputs(
        ttft_s=2.6,
        prefill_s=2.5,
        prompt_tokens_mean=4000,
        computed_tokens_per_s=300.0,
        cached_tokens_per_s=700.0,
        prefix_cache_queries_per_s=1000.0,
        prefix_cache_hits_per_s=100.0,  # ignored: the by-source counters are exact
    )
    cache = cache_split(inputs)
    assert cache.source == "prompt_tokens_by_source"
    assert (cache.prompt_tokens, cache.computed_tokens, cache.cached_tokens) == (4000, 1200, 2800)
    breakdown = split(inputs)
    assert english(breakdown.sentence) == (
        "TTFT 2.6 s: 2.5 s prefill (computing ~1200 of ~4000 prompt tokens per request; ~2800 cached)"
    )
    assert "~1200 computed and ~2800 read from the prefix cache (70% hit rate)" in english(
        breakdown.part("prefill").note
    )


def test_the_cache_split_falls_back_to_prefix_cache_queries_and_hits():
    cache = cache_split(TtftInputs(prefix_cache_queries_per_s=800.0, prefix_cache_hits_per_s=200.0))
    assert cache.source == "prefix_cache" and cache.computed_share == pytest.approx(0.75)
    assert cache.prompt_tokens is None
    assert english(cache.note) == "75% of prompt tokens computed, 25% read from the prefix cache"


def test_transferred_kv_counts_as_not_computed():
    cache = cache_split(
        TtftInputs(prompt_tokens_mean=1000, computed_tokens_per_s=50.0, cached_tokens_per_s=25.0,
                   transferred_tokens_per_s=25.0)
    )  # fmt: skip
    assert (cache.computed_tokens, cache.cached_tokens, cache.transferred_tokens) == (500, 250, 250)
    assert "~250 transferred from another engine's KV cache" in english(cache.note)


def test_no_cache_figures_or_no_traffic_means_no_cache_split():
    assert cache_split(TtftInputs()) is None
    assert cache_split(TtftInputs(prefix_cache_queries_per_s=0.0, prefix_cache_hits_per_s=0.0)) is None
    prefill = split(TtftInputs(ttft_s=1.0, prefill_s=0.5)).part("prefill")
    assert english(prefill.note) == "the engine's mean prefill time"


def test_missing_inputs_are_parts_marked_not_measured_with_the_reason():
    breakdown = split(TtftInputs(ttft_s=2.0))
    statuses = {p.key: p.status for p in breakdown.parts}
    assert statuses == {
        "connect": NOT_MEASURED,
        "tls": NOT_MEASURED,
        "gateway": NOT_APPLICABLE,
        "queue": NOT_MEASURED,
        "prefill": NOT_MEASURED,
        "other": MEASURED,
    }
    for key in ("connect", "queue", "prefill"):
        part = breakdown.part(key)
        assert part.seconds is None and part.share is None and part.note is not None
    assert "no queue-time histogram" in english(breakdown.part("queue").note)
    assert breakdown.cause == "other" and breakdown.part("other").seconds == 2.0
    assert english(breakdown.sentence).endswith("; not measured: queue, prefill")


def test_without_a_ttft_there_is_nothing_to_split_but_the_engine_parts_are_kept():
    breakdown = split(TtftInputs(queue_s=1.5, prefill_s=0.2))
    assert not breakdown.available and breakdown.cause is None and breakdown.segments == []
    assert english(breakdown.sentence) == "TTFT not measured: the stream probe has no first token to split"
    assert breakdown.part("queue").seconds == 1.5 and breakdown.part("queue").share is None
    assert breakdown.part("other").status == NOT_MEASURED


def test_engine_averages_larger_than_the_probes_ttft_are_said_to_be_so():
    breakdown = split(TtftInputs(ttft_s=1.0, queue_s=2.0, prefill_s=0.5))
    assert breakdown.part("other").seconds == 0.0
    assert breakdown.part("queue").share == pytest.approx(0.8)  # of the parts' sum, 2.5 s
    assert any("averages over its window" in english(n) for n in breakdown.notes)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, "3", None, True])
def test_odd_numbers_are_no_measurement(bad):
    breakdown = split(TtftInputs(ttft_s=2.0, queue_s=bad))
    queue = breakdown.part("queue")
    if bad == -1.0:
        assert queue.status == MEASURED and queue.seconds == 0.0
    else:
        assert queue.status == NOT_MEASURED


def test_the_bar_segments_cover_the_measured_parts_in_order():
    breakdown = split(TtftInputs(ttft_s=4.0, connect_s=1.0, https=False, queue_s=2.0))
    segments = breakdown.segments
    assert [s.key for s in segments] == ["connect", "queue", "other"]
    assert [(s.x, s.width) for s in segments] == [("0.00", "25.00"), ("25.00", "50.00"), ("75.00", "25.00")]


def test_seconds_are_rounded_for_reading():
    assert [nice(x) for x in (12.34, 6.14, 0.347, 0.0042, 0.00001)] == [12.0, 6.1, 0.35, 0.004, 0.0]
    assert (
        split(TtftInputs(ttft_s=0.0421, connect_s=0.0021, https=False)).part("connect").seconds_text
        == "0.002"
    )


def test_inputs_are_read_from_the_probes_stored_results():
    inputs = inputs_from_results(
        phases={"dns_s": 0.001, "connect_s": 0.004, "tls_s": 0.02, "ttfb_s": 0.5, "reused_connection": False},
        stream={"ttft_s": 1.25, "prompt_tokens": 12},
        derived={
            "queue_time_mean_s": 0.4,
            "queue_time_p50_s": 0.3,
            "prefill_time_p50_s": 0.6,
            "window_s": 30.0,
            "prompt_length_mean": 2000.0,
            "prefix_cache_queries_per_s": 100.0,
            "prefix_cache_hits_per_s": 40.0,
            "prompt_tokens_local_compute_per_s": 60.0,
        },
        https=True,
    )
    assert (inputs.ttft_s, inputs.connect_s, inputs.tls_s) == (1.25, 0.004, 0.02)
    assert inputs.queue_s == 0.4  # the mean before the median
    assert inputs.prefill_s == 0.6  # the median where there is no mean
    assert inputs.computed_tokens_per_s == 60.0 and inputs.cached_tokens_per_s is None
    assert cache_split(inputs).source == "prefix_cache"  # one source alone is not a split
    assert inputs.https is True and inputs.anything


def test_the_breakdown_goes_to_json_and_its_sentence_comes_back():
    breakdown = split(TtftInputs(ttft_s=6.1, queue_s=4.8, prefill_s=1.1))
    data = breakdown.to_json()
    assert data["cause"] == "queue" and len(data["parts"]) == len(PART_KEYS)
    assert english(Message.from_json(data["sentence"])) == english(breakdown.sentence)


def _page(computed: int, cached: int, queued: float, prefill: float, count: int) -> str:
    lines = []
    for source, value in (("local_compute", computed), ("local_cache_hit", cached)):
        lines.append(f'vllm:prompt_tokens_by_source_total{{engine="0",source="{source}"}} {value}')
    for name, total in (("request_queue_time_seconds", queued), ("request_prefill_time_seconds", prefill)):
        lines += [f'vllm:{name}_bucket{{le="{le}"}} {count}' for le in ("1.0", "10.0", "+Inf")]
        lines += [f"vllm:{name}_sum {total}", f"vllm:{name}_count {count}"]
    return "\n".join(lines) + "\n"


def test_the_metrics_probes_derived_figures_feed_the_split():
    before = parse_exposition(_page(1000, 0, 0.0, 0.0, 0), engine="vllm", timestamp=0.0)
    after = parse_exposition(_page(1300, 700, 8.0, 2.0, 4), engine="vllm", timestamp=30.0)
    inputs = inputs_from_results(stream={"ttft_s": 2.6}, derived=derive(previous=before, current=after))
    assert inputs.queue_s == pytest.approx(2.0) and inputs.prefill_s == pytest.approx(0.5)
    assert inputs.window_s == 30.0
    cache = cache_split(inputs)
    assert cache.source == "prompt_tokens_by_source" and cache.computed_share == pytest.approx(0.3)


# -- in the evidence of a TTFT finding ---------------------------------------------------


def _slow_parts(**gateway):
    from fleet.probes.outcomes import Outcome
    from fleet.probes.parts import ProbeParts
    from fleet.probes.phases import PhaseResult
    from fleet.probes.readiness import ReadinessResult
    from fleet.probes.streaming import StreamResult

    url = "http://10.0.0.9:8000/v1/chat/completions"
    phases = PhaseResult(url=url, method="POST", outcome=Outcome.OK, status=200, dns_s=0.0, connect_s=0.003,
                         ttfb_s=5.9, total_s=5.95)  # fmt: skip
    return ProbeParts(
        readiness=ReadinessResult(outcome=Outcome.OK, healthy=True),
        phases=phases,
        stream=StreamResult(
            outcome=Outcome.OK, ttft_s=6.1, total_s=6.4, prompt_tokens=14, completion_tokens=16
        ),
        derived={
            "window_s": 30.0,
            "queue_time_mean_s": 4.8,
            "prefill_time_mean_s": 1.1,
            "generation_tokens_per_s": 50.0,
            "prompt_tokens_per_s": 400.0,
        },  # fmt: skip
        **gateway,
    )


def test_a_ttft_finding_carries_the_breakdown_in_its_evidence():
    from fleet.probes.findings import Category, Thresholds
    from fleet.probes.judgement import judge
    from tests.probes.engines import make_target

    judged = judge(target=make_target("http://10.0.0.9:8000"), parts=_slow_parts(), thresholds=Thresholds())
    ttft = [f for f in judged.classification.findings if f.category == Category.TTFT]
    assert ttft, judged.classification.findings
    assert all(
        f.evidence.endswith("; TTFT 6.1 s: 4.8 s queued (waiting for capacity), 1.1 s prefill") for f in ttft
    ), [f.evidence for f in ttft]
    others = [f for f in judged.classification.findings if f.category != Category.TTFT]
    assert not any("queued (waiting for capacity)" in f.evidence for f in others)


def test_the_evidence_names_the_gateway_gap_measured_through_the_gateway():
    from fleet.probes.findings import Category, Thresholds
    from fleet.probes.judgement import judge
    from fleet.probes.outcomes import Outcome
    from fleet.probes.phases import PhaseResult
    from tests.probes.engines import make_target

    through = PhaseResult(url="http://gw/v1/chat/completions", method="POST", outcome=Outcome.OK, status=200,
                          ttfb_s=9.9, total_s=9.95)  # fmt: skip
    target = make_target("http://10.0.0.9:8000", gateway="edge-gw", gateway_url="http://gw:80")
    judged = judge(target=target, parts=_slow_parts(gateway_phases=through), thresholds=Thresholds())
    (first, *_) = [f for f in judged.classification.findings if f.category == Category.TTFT]
    assert "4 s in the gateway" in first.evidence, first.evidence
