"""The counters and histograms one engine records, in vLLM's terms.

Every number the /metrics pages show is recorded here from what the engine really did, so
they stay consistent: the request_success counts sum to the e2e histogram's count, and
generation_tokens is exactly the number of tokens emitted. A request that ends without a
first token (aborted while waiting) is counted in the success counter, e2e and the
request-size histograms, but not in the first-token, queue or phase histograms.

Prompt tokens are split by where their KV came from when the first token is sampled
(vllm:prompt_tokens_by_source): computed here, found in the local prefix cache, or
transferred from another instance; the three add up to prompt_tokens. Speculative decoding
counts drafts, drafted and accepted tokens, and acceptances per draft position, as vLLM's
SpecDecodingStats does. LoRA keeps every (running, waiting) adapter set the engine has
reported with the time it last did: vllm:lora_requests_info is a gauge set to the current
time under those labels, so old label sets stay on the page with older values.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from fleet.simulator.histograms import REQUEST_PARAMS_N, BucketSet, Histogram, build_1_2_5_buckets

LOCAL_COMPUTE = "local_compute"
LOCAL_CACHE_HIT = "local_cache_hit"
EXTERNAL_KV_TRANSFER = "external_kv_transfer"
PROMPT_TOKEN_SOURCES = (LOCAL_COMPUTE, LOCAL_CACHE_HIT, EXTERNAL_KV_TRANSFER)


@dataclass
class EngineStats:
    buckets: BucketSet
    created_wall: float = field(default_factory=time.time)
    prompt_tokens: int = 0
    generation_tokens: int = 0
    num_preemptions: int = 0
    requests_received: int = 0
    finished: Counter[str] = field(default_factory=Counter)
    prefix_queries_tokens: int = 0
    prefix_hits_tokens: int = 0
    prefill_steps: int = 0
    decode_steps: int = 0
    prompt_tokens_by_source: Counter[str] = field(default_factory=Counter)
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    spec_accepted_per_pos: list[int] = field(default_factory=list)
    lora_info: dict[tuple[str, str], float] = field(default_factory=dict)  # (running, waiting) -> wall time

    def __post_init__(self) -> None:
        b = self.buckets
        self.time_to_first_token = Histogram(b.first_token)
        self.inter_token_latency = Histogram(b.inter_token)
        self.request_time_per_output_token = Histogram(b.inter_token)
        self.e2e_latency = Histogram(b.latency)
        self.queue_time = Histogram(b.latency)
        self.inference_time = Histogram(b.latency)
        self.prefill_time = Histogram(b.latency)
        self.decode_time = Histogram(b.latency)
        self.iteration_tokens = Histogram(b.iteration_tokens)
        self.prompt_len = Histogram(b.request_tokens)
        self.generation_len = Histogram(b.request_tokens)
        self.max_generation_tokens = Histogram(b.request_tokens)
        self.params_max_tokens = Histogram(b.request_tokens)
        self.params_n = Histogram(REQUEST_PARAMS_N)

    @classmethod
    def for_vllm(cls, *, max_model_len: int, iteration_tokens: tuple[float, ...]) -> EngineStats:
        tokens = build_1_2_5_buckets(max_model_len)
        return cls(buckets=BucketSet(iteration_tokens=iteration_tokens, request_tokens=tokens))

    @property
    def finished_total(self) -> int:
        return sum(self.finished.values())

    def record_first_token(
        self, *, ttft_s: float, prompt_tokens: int, cache_hit: int = 0, transferred: int = 0
    ) -> None:
        self.time_to_first_token.observe(ttft_s)
        self.prompt_tokens += prompt_tokens
        self.prompt_tokens_by_source[LOCAL_CACHE_HIT] += cache_hit
        self.prompt_tokens_by_source[EXTERNAL_KV_TRANSFER] += transferred
        self.prompt_tokens_by_source[LOCAL_COMPUTE] += prompt_tokens - cache_hit - transferred

    def record_tokens(self, *, count: int) -> None:
        self.generation_tokens += count

    def record_step(self, *, scheduled_tokens: int, times: int, prefill: bool) -> None:
        self.iteration_tokens.observe(scheduled_tokens, times)
        if prefill:
            self.prefill_steps += times
        else:
            self.decode_steps += times

    def record_spec_draft(self, *, draft_tokens: int, accepted: int) -> None:
        """One draft of draft_tokens proposals whose first `accepted` were accepted."""
        if len(self.spec_accepted_per_pos) < draft_tokens:
            self.spec_accepted_per_pos.extend([0] * (draft_tokens - len(self.spec_accepted_per_pos)))
        self.spec_drafts += 1
        self.spec_draft_tokens += draft_tokens
        self.spec_accepted_tokens += accepted
        for position in range(accepted):
            self.spec_accepted_per_pos[position] += 1

    def record_lora(self, *, running: str, waiting: str, wall: float) -> None:
        self.lora_info[(running, waiting)] = wall

    def record_prefix_lookup(self, *, queried: int, hit: int) -> None:
        self.prefix_queries_tokens += queried
        self.prefix_hits_tokens += hit

    def record_finish(self, timing: FinishTiming) -> None:
        """One finished request: success counter, e2e and size histograms, and the phase
        histograms if it got as far as its first token."""
        self.finished[timing.reason] += 1
        self.e2e_latency.observe(timing.e2e_s)
        self.prompt_len.observe(timing.prompt_tokens)
        self.generation_len.observe(timing.output_tokens)
        self.max_generation_tokens.observe(timing.max_tokens)
        self.params_max_tokens.observe(timing.max_tokens)
        self.params_n.observe(1)
        if timing.queue_s is None:
            return
        self.queue_time.observe(timing.queue_s)
        self.inference_time.observe(timing.inference_s)
        self.prefill_time.observe(timing.prefill_s)
        self.decode_time.observe(timing.decode_s)
        if timing.output_tokens > 1:
            self.request_time_per_output_token.observe(timing.decode_s / (timing.output_tokens - 1))


@dataclass(frozen=True, kw_only=True)
class FinishTiming:
    reason: str
    prompt_tokens: int
    output_tokens: int
    max_tokens: int
    e2e_s: float
    queue_s: float | None = None  # None: never reached its first token
    inference_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0
