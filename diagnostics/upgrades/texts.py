"""What each fact of data/vllm_changes.yaml means to an operator, in words, keyed by the fact's
id. The table holds the facts and their sources; the words live here so that makemessages
finds them (core.i18n.later) and each reader gets them in their language."""

from __future__ import annotations

from core.i18n import Message, later

TEXTS: dict[str, Message] = {
    # Metrics: what the rename means beyond the name.
    "kv_usage_renamed": later("The same 0 to 1 value under a new name."),
    "kv_usage_new": later("Replaces `vllm:gpu_cache_usage_perc`."),
    "prefix_queries_renamed": later(
        "The old counter counts blocks, the new one tokens: a hit rate keeps its meaning, absolute "
        "rates do not."
    ),
    "prefix_hits_renamed": later(
        "The old counter counts blocks, the new one tokens: a hit rate keeps its meaning, absolute "
        "rates do not."
    ),
    "prefix_queries_new": later("Counts queried tokens."),
    "prefix_hits_new": later("Counts cached tokens."),
    "tpot_renamed": later(
        "The same histogram, named for what it always measured: the gap between engine steps. The "
        "mean per request is `vllm:request_time_per_output_token_seconds`."
    ),
    "itl_new": later("Replaces `vllm:time_per_output_token_seconds`."),
    "request_tpot_new": later("The mean time per output token of each request, recorded when it finishes."),
    "engine_sleep_state_new": later(
        "Says whether the engine sleeps (sleep mode): a sleeping engine is not a dead one."
    ),
    "prompt_tokens_by_source_new": later(
        "Splits prompt tokens by where they came from: computed, found in the local cache, or "
        "transferred from another instance."
    ),
    "prompt_tokens_cached_new": later("Counts cached prompt tokens, local and external."),
    "waiting_by_reason_new": later(
        "Splits waiting requests by reason: capacity (KV cache or batch room) or deferred (a passing "
        "constraint such as the LoRA budget)."
    ),
    "spec_decode_tokens_v1": later("Tokens drafted by speculative decoding (only when it is on)."),
    "spec_decode_accepted_v1": later("Draft tokens the model accepted (only with speculative decoding)."),
    "spec_decode_drafts_new": later("Drafts made by speculative decoding (only when it is on)."),
    "spec_decode_per_pos_new": later("Accepted draft tokens by position in the draft."),
    "v0_swapped": later(
        "The V1 engine never swaps KV cache to CPU: it preempts and recomputes, so swap metrics are gone."
    ),
    "v0_cpu_cache": later(
        "The V1 engine never swaps KV cache to CPU: it preempts and recomputes, so swap metrics are gone."
    ),
    "v0_prefix_hit_rate": later(
        "The V1 engine exports two counters instead: hit rate = rate(`vllm:prefix_cache_hits_total`) / "
        "rate(`vllm:prefix_cache_queries_total`)."
    ),
    "v0_cpu_prefix_hit_rate": later("There is no CPU prefix cache in the V1 engine."),
    # Flags.
    "disable_log_stats_v1": later(
        "In the V1 engine `--disable-log-stats` also removes every `vllm:*` series from `/metrics`: "
        "probes, alert rules and dashboards go blind."
    ),
    "swap_space_no_effect": later(
        "The V1 engine never swaps to CPU: `--swap-space` is accepted and does nothing."
    ),
    "swap_space_removed": later(
        "`--swap-space` is rejected: the server does not start until it is taken off the command line."
    ),
    "prompt_adapter_removed": later(
        "Prompt adapters are gone; a command line with `--enable-prompt-adapter` is rejected."
    ),
    "log_requests_default_off": later(
        "Requests are no longer logged by default. `--disable-log-requests` is still accepted, with a "
        "warning; `--enable-log-requests` turns logging on."
    ),
    "enable_log_requests_added": later("`--enable-log-requests` turns request logging on (off by default)."),
    "disable_log_requests_removed": later(
        "`--disable-log-requests` is gone: request logging is off unless `--enable-log-requests` is given."
    ),
    "log_requests_debug_only": later(
        "With `--enable-log-requests` the prompts appear only at log level DEBUG "
        "(`VLLM_LOGGING_LEVEL=DEBUG`)."
    ),
    "task_deprecated": later(
        "`--task` is deprecated: use `--runner` and `--convert` (generative models need neither)."
    ),
    "task_removed": later("`--task` is rejected: use `--runner` and `--convert`."),
    "num_scheduler_steps_removed": later(
        "Multi-step scheduling, a V0 feature, is gone: `--num-scheduler-steps` is rejected."
    ),
    "guided_decoding_backend_removed": later(
        "`--guided-decoding-backend` and the other `--guided-decoding-*` options are rejected: use "
        "`--structured-outputs-config.backend`."
    ),
    "kv_cache_memory_bytes_added": later(
        "`--kv-cache-memory-bytes` sets the KV cache per GPU directly, instead of what "
        "`gpu_memory_utilization` leaves for it."
    ),
    "v0_engine_removed": later(
        "The V0 engine is gone: `VLLM_USE_V1=0` no longer selects it, and a feature that fell back to "
        "V0 runs on V1 or not at all."
    ),
    # Defaults.
    "chunked_prefill_default_on": later(
        "Chunked prefill is on by default: long prompts are split into steps of "
        "`max_num_batched_tokens`, which also bounds the activation memory."
    ),
    "prefix_caching_default_on": later(
        "Prefix caching is on by default: shared prompt prefixes are served from the KV cache "
        "(`--no-enable-prefix-caching` turns it off). The KV capacity itself does not change."
    ),
    "request_logging_default_off": later(
        "Request logging is off by default; `--enable-log-requests` turns it on."
    ),
    "a100_batch_defaults": later(
        "On A100 80 GB the API server's defaults drop from 1024 sequences and 8192 batched tokens to "
        "256 and 2048, unless the command line sets them. H100 and H200 keep 1024 and 8192."
    ),
    "cuda_graph_full_and_piecewise": later(
        "CUDA graphs are captured in FULL_AND_PIECEWISE mode by default: more graphs, and more memory "
        "outside the `gpu_memory_utilization` budget (until 0.20). Keep that slack."
    ),
    "batched_tokens_trimmed": later(
        "An unset `max_num_batched_tokens` is trimmed to `max_num_seqs` x `max_model_len`, and raised "
        "to `max_model_len` when chunked prefill is off."
    ),
    "request_rounded_up": later(
        "The memory vLLM requests (total x `gpu_memory_utilization`) is rounded up to a whole byte; "
        "the KV cache changes by a block at most."
    ),
    "gpu_memory_utilization_092": later(
        "The default `gpu_memory_utilization` goes from 0.9 to 0.92: a launch without "
        "`--gpu-memory-utilization` gets two percentage points more of each GPU."
    ),
    "cuda_graph_memory_subtracted": later(
        "An estimate of the CUDA-graph memory is taken from the KV cache budget "
        "(`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1`): the same `gpu_memory_utilization` gives a "
        "smaller KV cache. vLLM's log names the value that keeps the old size; "
        "`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0` restores the old accounting."
    ),
    "kv_tokens_from_concurrency": later(
        'The start-up line "GPU KV cache size" counts tokens as maximum concurrency x '
        "`max_model_len`: the same cache can log a different number."
    ),
}


def text(fact_id: str) -> Message | None:
    return TEXTS.get(fact_id)
