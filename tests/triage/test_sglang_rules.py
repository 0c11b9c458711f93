"""The SGLang triage rules, on lines made the way SGLang's source makes them (the f-strings of
its scheduler, watchdog, HTTP server, CUDA graph runner and model config, with its log
prefix): each finds its category, a healthy SGLang start finds nothing, and in a log where
the scheduler got stuck the hang ranks above the crash it causes."""

from __future__ import annotations

import pytest

from core.taxonomy import CATEGORIES
from diagnostics.triage import rules as triage_rules
from diagnostics.triage.engine import Matcher, triage_text
from diagnostics.triage.messages import rule_texts

RULES = {rule.id: rule for rule in triage_rules.load()}
MATCHER = Matcher(tuple(RULES.values()))
NEW = (
    "sglang_context_length_over_model",
    "sglang_cuda_graph_capture_oom",
    "sglang_health_check_failed",
    "sglang_watchdog_timeout",
    "sglang_queue_with_kv_room",
    "sglang_kv_full_with_queue",
)
PREFIX = "[2026-12-05 10:00:00 TP0] "


def decode_line(*, running: int, usage: float, queued: int, new_format: bool = False) -> str:
    """scheduler_metrics_mixin.log_decode_stats: 'Decode batch[, .]' #running-req ... #queue-req."""
    head = "Decode batch, " if new_format else "Decode batch. "
    return (
        f"{PREFIX}{head}#running-req: {running}, #token: {int(usage * 400000)}, token usage: {usage:.2f}, "
        f"cuda graph: True, gen throughput (token/s): 1834.27, #queue-req: {queued}, "
    )


def prefill_line(*, usage: float, queued: int) -> str:
    """scheduler_metrics_mixin.log_prefill_stats."""
    return (
        f"{PREFIX}Prefill batch, #new-seq: 3, #new-token: 6144, #cached-token: 512, token usage: "
        f"{usage:.2f}, "
        f"#running-req: 64, #queue-req: {queued}, "
    )


def watchdog_line(debug_name: str = "Scheduler", timeout: float = 300, soft: bool = False) -> str:
    """utils/watchdog.py: f"{self.debug_name} watchdog timeout ({self.watchdog_timeout=}, {self.soft=})"."""
    return f"{PREFIX}{debug_name} watchdog timeout (self.watchdog_timeout={timeout!r}, self.soft={soft!r})"


def health_line(seconds: int = 20) -> str:
    """entrypoints/http_server.py health_generate, when the scheduler sends nothing back."""
    return (
        f"[2026-12-05 10:00:20] Health check failed. Server couldn't get a response from detokenizer "
        f"for last "
        f"{seconds} seconds. tic start time: 10:00:00. last_heartbeat time: 09:55:12"
    )


def context_line(*, given: int, derived: int, allowed: bool) -> str:
    """configs/model_config.py _derive_context_length."""
    msg = (
        f"Warning: User-specified context_length ({given}) is greater than the derived context_length "
        f"({derived}). This may lead to incorrect model outputs or CUDA errors. Note that the derived "
        "context_length may differ from max_position_embeddings in the model's config."
    )
    if allowed:
        return f"[2026-12-05 10:00:01] {msg}"
    env = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
    return f"ValueError: {msg} To allow overriding this maximum, set the env var {env}"


def capture_line(error: str) -> str:
    """model_executor/cuda_graph_runner.py."""
    return f"Exception: Capture cuda graph failed: {error}"


def found(line: str) -> set[str]:
    return {rule.id for rule in MATCHER.rules_of(line.encode())}


def test_the_new_rules_load_with_taxonomy_categories_sources_and_translatable_texts():
    for rule_id in NEW:
        rule = RULES[rule_id]
        assert rule.category in CATEGORIES and rule.sources == ("sglang",)
        assert len(rule.fix) > 30 and rule.tests.get("match") and rule.tests.get("no_match")
        assert [where for _text, where in rule_texts(rule)][:2] == [
            f"rules.yaml rule {rule_id}: root_cause",
            f"rules.yaml rule {rule_id}: fix",
        ]


@pytest.mark.parametrize(
    ("line", "rule_id"),
    [
        (decode_line(running=256, usage=0.41, queued=120), "sglang_queue_with_kv_room"),
        (decode_line(running=256, usage=0.41, queued=120, new_format=True), "sglang_queue_with_kv_room"),
        (prefill_line(usage=0.60, queued=15), "sglang_queue_with_kv_room"),
        (decode_line(running=233, usage=0.97, queued=317), "sglang_kv_full_with_queue"),
        (prefill_line(usage=1.00, queued=2), "sglang_kv_full_with_queue"),
        (watchdog_line(), "sglang_watchdog_timeout"),
        (watchdog_line("TokenizerManager", 600.0, True), "sglang_watchdog_timeout"),
        (health_line(), "sglang_health_check_failed"),
        (context_line(given=65536, derived=32768, allowed=False), "sglang_context_length_over_model"),
        (capture_line("CUDA out of memory. Tried to allocate 2.00 GiB."), "sglang_cuda_graph_capture_oom"),
    ],
)
def test_each_rule_finds_the_line_sglang_prints(line, rule_id):
    assert rule_id in found(line)


@pytest.mark.parametrize(
    "line",
    [
        decode_line(running=12, usage=0.62, queued=0),
        decode_line(running=12, usage=0.62, queued=9),  # fewer than ten queued: a step's worth
        decode_line(running=233, usage=0.97, queued=0),  # a full pool without a queue is utilization
        decode_line(running=200, usage=0.93, queued=40),  # 0.90-0.94: neither rule
        context_line(given=65536, derived=32768, allowed=True),
        capture_line("Ninja build failed."),
        f"{PREFIX}Capture cuda graph end. Time elapsed: 9.12 s. mem usage=0.61 GB. avail mem=6.02 GB.",
        "[2026-12-05 10:00:30] The server is fired up and ready to roll!",
    ],
)
def test_healthy_and_neighbouring_lines_find_none_of_them(line):
    assert not found(line) & set(NEW)


def test_a_healthy_sglang_start_has_no_findings():
    log = "\n".join(
        [
            "[2026-12-05 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1, "
            "mem_fraction_static=0.88, chunked_prefill_size=8192, watchdog_timeout=300, enable_metrics=True)",
            f"{PREFIX}Load weight begin. avail mem=78.50 GB",
            f"{PREFIX}Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=63.07 "
            f"GB, mem usage=15.43 GB.",
            f"{PREFIX}KV Cache is allocated. #tokens: 391540, K size: 26.88 GB, V size: 26.88 GB",
            f"{PREFIX}Capture cuda graph end. Time elapsed: 9.12 s. mem usage=0.61 GB. avail mem=6.02 GB.",
            "[2026-12-05 10:00:30] The server is fired up and ready to roll!",
            prefill_line(usage=0.01, queued=0),
            decode_line(running=8, usage=0.05, queued=0),
        ]
    )
    assert triage_text(log).findings == []


def test_a_stuck_scheduler_ranks_the_hang_above_the_crash_it_causes():
    log = "\n".join(
        [
            decode_line(running=32, usage=0.20, queued=0),
            health_line(),
            watchdog_line(),
            "[2026-12-05 10:05:06] Received sigquit from a child process. It usually means the child failed.",
        ]
    )
    result = triage_text(log)
    assert result.category == "process.hung"
    hits = {hit.rule.id for finding in result.findings for hit in finding.rules}
    assert {"sglang_health_check_failed", "sglang_watchdog_timeout", "sglang_scheduler_died"} <= hits


def test_a_context_length_refusal_is_a_configuration_error_that_stops_the_start():
    result = triage_text(context_line(given=131072, derived=40960, allowed=False))
    assert (result.category, result.primary.severity) == ("model_loading.config", "fatal")


def test_a_full_pool_with_a_queue_is_kv_pressure_and_a_capped_batch_is_the_queue():
    assert triage_text(decode_line(running=233, usage=0.98, queued=50)).category == "oom.kv_pressure"
    assert triage_text(decode_line(running=256, usage=0.40, queued=50)).category == "rate_limit.queue"


def test_a_graph_capture_oom_is_a_gpu_oom_with_sglangs_own_fix():
    result = triage_text(capture_line("CUDA out of memory. Tried to allocate 1.02 GiB."))
    assert result.category == "oom.gpu" and result.primary.severity == "fatal"
    fixes = " ".join(hit.rule.fix for finding in result.findings for hit in finding.rules)
    assert "--mem-fraction-static" in fixes and "--cuda-graph-max-bs" in fixes
