"""A continuous-batching engine in plain Python, driven by whatever clock calls advance().

The scheduler follows vLLM V1 closely enough for an ops console to see the same symptoms:
- every step has a token budget (max_num_batched_tokens); running requests are served
  first (one token per decoding sequence, a chunk of prompt for prefilling ones), then
  waiting requests are admitted first-come first-served while a running slot
  (max_num_seqs) and the KV blocks for their first chunk are free;
- when a running request needs a block and none is free, the newest running request is
  preempted (its blocks freed, back to the front of the queue, counted in
  num_preemptions); it later recomputes its prompt and output. Not an OOM (corrections #3);
- at the end of each step every decoding sequence emits one token, and a request whose
  prefill completes emits its first.

State changes at step boundaries only: a step is planned at its start (admission, block
allocation, preemption) and its tokens appear at its end, so a clock that jumps is handled
by running every step that ends before "now". While only decodes run and nothing can
change the batch, k identical steps are taken at once (one loop iteration, k tokens per
sequence), which keeps a thousand idle-ish engines cheap.

What V1 has beyond that (`EngineFeatures`, set from the spec and the faults by
engine_effects.py; docs/vllm-metrics.md):
- sleep mode: asleep, the engine takes no step, its KV cache is discarded (running requests
  go back to the queue) and new requests wait until it wakes; /health stays 200;
- waiting requests are "capacity" (queued for blocks or a slot) or "deferred": skipped by
  the scheduler for a transient constraint, which it passes over to admit the next one:
  the LoRA budget (an adapter not running while max_loras adapters are) or a KV transfer
  still pending (requests held for the waiting_deferred fault; released, their prompt KV
  counts as transferred);
- speculative decoding: each decoding sequence drafts up to num_speculative_tokens, each
  accepted with probability spec_acceptance as long as the ones before it were; a step
  then emits 1 + accepted tokens per sequence and costs a little more for the drafting;
- LoRA: requests take the spec's adapters in turn; every step reports the running and
  waiting adapter sets (vllm:lora_requests_info).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from fleet.simulator.engine_requests import EngineKnobs, EngineRequest, RequestState
from fleet.simulator.engine_stats import EngineStats, FinishTiming
from fleet.simulator.kv_blocks import BlockPool
from fleet.simulator.timing import PerfModel

BUSY_WINDOW_S = 2.0
# Drafting one token costs this share of a decode step (a small draft model, EAGLE or MTP):
# k = 3 drafts make a step 1.24x as long, so acceptance below ~20% is slower than none.
DRAFT_COST_PER_TOKEN = 0.08
KV_TRANSFER_CLIENT = "sim-kv-transfer"  # the requests the waiting_deferred fault holds
__all__ = ["Engine", "EngineFeatures", "EngineKnobs", "EngineRequest", "RequestState"]


@dataclass
class EngineFeatures:
    """What the engine runs with beyond the knobs (engine_effects.py sets it)."""

    spec_tokens: int = 0  # num_speculative_tokens; 0: no speculative decoding
    spec_acceptance: float = 0.7  # chance each draft token is accepted, given the ones before
    lora_adapters: tuple[str, ...] = ()  # requests take these in turn; (): no LoRA
    max_loras: int = 1  # adapters that can run at once (vLLM's --max-loras)
    lora_starved: bool = False  # lora_starving: no adapter can be scheduled
    prefix_hit_factor: float = 1.0  # prefix_cache_collapse: share of the usual hits still found
    hold_deferred: int = 0  # waiting_deferred: requests kept waiting for a KV transfer
    hold_prompt_tokens: int = 1000
    hold_output_tokens: int = 200


@dataclass(slots=True)
class _Step:
    start: float
    duration: float
    times: int
    decodes: list[EngineRequest]
    prefills: list[tuple[EngineRequest, int]]
    drafts: dict[int, int] = field(default_factory=dict)  # request id -> draft tokens this step

    @property
    def end(self) -> float:
        return self.start + self.duration * self.times


@dataclass(eq=False)
class Engine:
    perf: PerfModel
    stats: EngineStats
    num_gpu_blocks: int
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    enable_prefix_caching: bool = True
    knobs: EngineKnobs = field(default_factory=EngineKnobs)
    now: float = 0.0  # the engine's own time: the end of the last step, or the last idle tick
    features: EngineFeatures = field(default_factory=EngineFeatures)
    seed: int = 0

    def __post_init__(self) -> None:
        self.pool = BlockPool(total=self.num_gpu_blocks, block_size=self.block_size)
        # Admission leaves 1% of the blocks free (V0's watermark=0.01), and a preempted
        # request comes back only when its whole recompute fits, so it is not readmitted
        # just to be preempted again at the next block boundary (a recompute storm).
        self.watermark_blocks = int(self.num_gpu_blocks * 0.01)
        self.running: list[EngineRequest] = []
        self.waiting: deque[EngineRequest] = deque()
        self._ids = itertools.count(1)
        self._step: _Step | None = None
        self._last_advance = self.now
        self.busy_fraction = 0.0  # share of recent time spent in steps (for GPU utilization)
        self.rng = random.Random(self.seed)
        self._started = self.now
        self._sleep_by_fault = 0
        self._sleep_by_call = 0
        self._adapter: dict[int, str] = {}  # request id -> LoRA adapter
        self._held: dict[int, EngineRequest] = {}  # waiting for a KV transfer (waiting_deferred)
        self._transferred: set[int] = set()  # their KV arrived: prompt counted as transferred
        self._sources: dict[int, tuple[int, int]] = {}  # id -> (cache hit, transferred) tokens

    # -- requests in and out ---------------------------------------------------------------

    def submit(
        self,
        *,
        prompt_tokens: int,
        max_tokens: int,
        target_tokens: int | None = None,
        arrival: float | None = None,
        client: str = "",
        cached_tokens: int = 0,
        deadline: float | None = None,
        listener: Callable[[EngineRequest], None] | None = None,
    ) -> EngineRequest:
        target = max_tokens if target_tokens is None else max(1, min(target_tokens, max_tokens))
        req = EngineRequest(
            id=next(self._ids),
            prompt_tokens=max(1, prompt_tokens),
            max_tokens=max_tokens,
            target_tokens=target,
            arrival=self.now if arrival is None else arrival,
            client=client,
            cached_tokens=cached_tokens,
            deadline=deadline,
            listener=listener,
        )
        req.prefill_target = req.prompt_tokens
        self.stats.requests_received += 1
        adapters = self.features.lora_adapters
        if adapters and client != KV_TRANSFER_CLIENT:
            self._adapter[req.id] = adapters[req.id % len(adapters)]
        if self.knobs.dead:
            self._fail(req)
        else:
            self.waiting.append(req)
        return req

    def abort(self, req: EngineRequest, *, at: float | None = None) -> None:
        """The client went away: free its blocks and count it as finished_reason "abort"."""
        if req.done:
            return
        self._finish(req, "abort", self.now if at is None else at)

    def fail_all(self) -> None:
        """The engine died: every request in it fails without reaching the stats."""
        self._step = None
        for req in [*self.running, *self.waiting]:
            self._fail(req)

    # -- time ------------------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Run every step that ends by `now`."""
        self._abort_overdue(now)
        self._hold_for_transfer(now)
        while True:
            step = self._step
            if step is not None:
                if step.end > now:
                    break
                self._step = None
                self.now = step.end
                self._complete(step)
                continue
            if self.knobs.stalled or self.knobs.dead or self.sleep_level:
                break
            self._step = self._plan(now)
            if self._step is None:
                break
        self.now = max(self.now, now) if self._step is None else self.now
        self._update_busy(now)
        if self.features.lora_adapters and (self.running or self.waiting):
            self._record_lora(self.now)

    def _abort_overdue(self, now: float) -> None:
        for req in [r for r in itertools.chain(self.running, self.waiting) if r.deadline is not None]:
            if req.deadline <= now:
                self.abort(req, at=req.deadline)

    def _update_busy(self, now: float) -> None:
        # Steps run back to back while there is work, so "busy" is "has a step in flight".
        elapsed = now - self._last_advance
        if elapsed <= 0:
            return
        share = 1.0 if self._step is not None else 0.0
        self.busy_fraction += (share - self.busy_fraction) * (1 - math.exp(-elapsed / BUSY_WINDOW_S))
        self._last_advance = now

    # -- planning a step -------------------------------------------------------------------

    def _plan(self, now: float) -> _Step | None:
        if not self.running:
            if not self.waiting or self.waiting[0].arrival > now:
                return None
            self.now = max(self.now, self.waiting[0].arrival)
        start = self.now
        decodes: list[EngineRequest] = []
        prefills: list[tuple[EngineRequest, int]] = []
        drafts: dict[int, int] = {}
        budget, preempted = self._schedule_running(decodes, prefills, drafts)
        if not preempted:
            self._admit_waiting(start, prefills, budget)
        if not decodes and not prefills:
            return None
        duration = self._duration(decodes, prefills, drafts)
        # Drafts are accepted at random, so steps that draft are not identical: one at a time.
        repeat = not prefills and not drafts
        times = self._repeat_count(start, duration, now, decodes) if repeat else 1
        return _Step(
            start=start, duration=duration, times=times, decodes=decodes, prefills=prefills, drafts=drafts
        )

    def _schedule_running(
        self,
        decodes: list[EngineRequest],
        prefills: list[tuple[EngineRequest, int]],
        drafts: dict[int, int],
    ) -> tuple[int, bool]:
        budget = self.max_num_batched_tokens
        preempted = False
        for req in list(self.running):
            if req.state is not RequestState.RUNNING:
                continue  # preempted a moment ago to make room for an older request
            if budget <= 0:
                break
            drafted = 0 if req.in_prefill else self._draft_length(req, budget)
            tokens = min(budget, req.prefill_target - req.computed) if req.in_prefill else 1 + drafted
            need = self.pool.blocks_for(req.computed + tokens) - req.blocks
            while need > self.pool.free and req.state is RequestState.RUNNING:
                self._preempt(self.running[-1])
                preempted = True
            if req.state is not RequestState.RUNNING:
                break
            self.pool.allocate(need)
            req.blocks += need
            budget -= tokens
            if req.in_prefill:
                prefills.append((req, tokens))
            else:
                decodes.append(req)
                if drafted:
                    drafts[req.id] = drafted
        return budget, preempted

    def _draft_length(self, req: EngineRequest, budget: int) -> int:
        """Draft tokens for a decoding request: num_speculative_tokens, fewer near its end
        (nothing past its last token) or when the step's token budget runs short."""
        k = self.features.spec_tokens
        if not k:
            return 0
        return max(0, min(k, req.target_tokens - req.output_tokens - 1, budget - 1))

    def _admit_waiting(self, start: float, prefills: list[tuple[EngineRequest, int]], budget: int) -> None:
        """First come, first served while blocks and slots last; a deferred request (LoRA
        budget, KV transfer pending) is passed over and keeps its place in the queue."""
        skipped: list[EngineRequest] = []
        adapters = self.running_adapters()
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            if req.arrival > start:
                break
            if self._deferred(req, adapters):
                skipped.append(self.waiting.popleft())
                continue
            first = req.scheduled_at is None
            transferred = first and req.id in self._transferred
            cached = (req.prompt_tokens - 1 if transferred else self._cached_tokens(req)) if first else 0
            tokens = min(budget, req.prefill_target - cached)
            need = self.pool.blocks_for(cached + tokens)
            if self._admission_blocks(req, need) > self.pool.free or not self.pool.allocate(need):
                break
            self.waiting.popleft()
            req.blocks, req.computed, req.state = need, cached, RequestState.RUNNING
            self.running.append(req)
            if first:
                req.scheduled_at = start
                self._sources[req.id] = (0, cached) if transferred else (cached, 0)
                self._transferred.discard(req.id)
                if self.enable_prefix_caching and not transferred:
                    self.stats.record_prefix_lookup(queried=req.prompt_tokens, hit=cached)
            if req.id in self._adapter and self._adapter[req.id] not in adapters:
                adapters.append(self._adapter[req.id])
            budget -= tokens
            prefills.append((req, tokens))
        self.waiting.extendleft(reversed(skipped))

    def _deferred(self, req: EngineRequest, running_adapters: list[str]) -> bool:
        if req.id in self._held:
            return True
        adapter = self._adapter.get(req.id)
        if adapter is None or (adapter in running_adapters and not self.features.lora_starved):
            return False
        return self.features.lora_starved or len(running_adapters) >= self.features.max_loras

    def _admission_blocks(self, req: EngineRequest, first_chunk: int) -> int:
        """Blocks that must be free to admit: the first chunk for a new request (V1), the
        whole recompute for a preempted one, plus the watermark."""
        needed = self.pool.blocks_for(req.prefill_target) if req.preemptions else first_chunk
        return needed + self.watermark_blocks

    def _cached_tokens(self, req: EngineRequest) -> int:
        if not self.enable_prefix_caching:
            return 0
        # Whole blocks only, and never the last prompt token (it must be computed to sample).
        found = int(req.cached_tokens * self.features.prefix_hit_factor)
        whole = found // self.block_size * self.block_size
        return max(0, min(whole, (req.prompt_tokens - 1) // self.block_size * self.block_size))

    def _duration(
        self,
        decodes: list[EngineRequest],
        prefills: list[tuple[EngineRequest, int]],
        drafts: dict[int, int] | None = None,
    ) -> float:
        prefill_s = sum(self.perf.prefill_seconds(start=r.computed, end=r.computed + n) for r, n in prefills)
        seconds = self.perf.step_seconds(
            decode_seqs=len(decodes) + sum((drafts or {}).values()),
            context_tokens=sum(r.computed for r in decodes),
            prefill_s=prefill_s * self.knobs.prefill_factor,
        )
        if drafts:
            seconds *= 1 + DRAFT_COST_PER_TOKEN * max(drafts.values())
        return seconds * self.knobs.step_factor

    def _repeat_count(self, start: float, duration: float, now: float, decodes: list[EngineRequest]) -> int:
        """How many identical decode steps to take at once: until `now`, the first finish,
        or the arrival of the next waiting request, and only while blocks suffice."""
        times = min(int((now - start) / duration), min(r.target_tokens - r.output_tokens for r in decodes))
        if self.waiting and self.waiting[0].arrival > start:
            times = min(times, math.ceil((self.waiting[0].arrival - start) / duration))
        if times <= 1:
            return 1
        extra = [self.pool.blocks_for(r.computed + times) - r.blocks for r in decodes]
        if not self.pool.allocate(sum(extra)):
            return 1
        for req, blocks in zip(decodes, extra, strict=True):
            req.blocks += blocks
        return times

    def _preempt(self, req: EngineRequest) -> None:
        self._requeue(req)
        req.preemptions += 1
        self.stats.num_preemptions += 1

    def _requeue(self, req: EngineRequest) -> None:
        """Back to the front of the queue without its KV: it recomputes everything."""
        self.running.remove(req)
        self.pool.release(req.blocks)
        req.blocks = 0
        req.computed = 0
        req.prefill_target = req.prompt_tokens + req.output_tokens
        req.state = RequestState.WAITING
        self.waiting.appendleft(req)

    # -- completing a step -----------------------------------------------------------------

    def _complete(self, step: _Step) -> None:
        touched = [r for r in step.decodes if r.state is RequestState.RUNNING]
        for req in touched:
            self._emit_decoded(req, step)
        for req, tokens in step.prefills:
            if req.state is RequestState.RUNNING:
                req.computed += tokens
                touched.append(req)
                if not req.in_prefill:
                    self._emit_token(req, step.end)
        scheduled = len(step.decodes) + sum(step.drafts.values()) + sum(n for _, n in step.prefills)
        self.stats.record_step(scheduled_tokens=scheduled, times=step.times, prefill=bool(step.prefills))
        for req in touched:
            if req.output_tokens >= req.target_tokens:
                self._finish(req, "length" if req.target_tokens >= req.max_tokens else "stop", step.end)
            elif req.listener is not None:
                req.listener(req)

    def _emit_decoded(self, req: EngineRequest, step: _Step) -> None:
        # One inter-token interval per streamed output: a step that accepts drafts emits
        # several tokens at once, one interval (vllm#52853).
        self.stats.inter_token_latency.observe(step.start + step.duration - req.last_token_at)
        if step.times > 1:
            self.stats.inter_token_latency.observe(step.duration, step.times - 1)
        emitted = step.times
        drafted = step.drafts.get(req.id, 0)
        if drafted:
            accepted = 0
            while accepted < drafted and self.rng.random() < self.features.spec_acceptance:
                accepted += 1
            self.stats.record_spec_draft(draft_tokens=drafted, accepted=accepted)
            emitted = 1 + accepted
        req.computed += emitted
        req.output_tokens += emitted
        req.last_token_at = step.end
        self.stats.record_tokens(count=emitted)

    def _emit_token(self, req: EngineRequest, at: float) -> None:
        """The token sampled at the end of a prefill: the first, or the next after a preemption."""
        if req.first_token_at is None:
            req.first_token_at = at
            hit, transferred = self._sources.pop(req.id, (0, 0))
            self.stats.record_first_token(
                ttft_s=at - req.arrival,
                prompt_tokens=req.prompt_tokens,
                cache_hit=hit,
                transferred=transferred,
            )
        else:
            self.stats.inter_token_latency.observe(at - req.last_token_at)
        req.output_tokens += 1
        req.last_token_at = at
        self.stats.record_tokens(count=1)

    def _finish(self, req: EngineRequest, reason: str, at: float) -> None:
        self._leave(req)
        req.state, req.finish_reason, req.finished_at = RequestState.FINISHED, reason, at
        self.stats.record_finish(_timing(req, reason, at))
        if req.listener is not None:
            req.listener(req)

    def _fail(self, req: EngineRequest) -> None:
        self._leave(req)
        req.state, req.finish_reason = RequestState.FAILED, "error"
        if req.listener is not None:
            req.listener(req)

    def _leave(self, req: EngineRequest) -> None:
        if req.state is RequestState.RUNNING:
            self.running.remove(req)
        elif req.state is RequestState.WAITING and req in self.waiting:
            self.waiting.remove(req)
        self.pool.release(req.blocks)
        req.blocks = 0
        self._adapter.pop(req.id, None)
        self._held.pop(req.id, None)
        self._transferred.discard(req.id)
        self._sources.pop(req.id, None)

    # -- sleep mode, held KV transfers, LoRA ------------------------------------------------

    @property
    def sleep_level(self) -> int:
        """0 awake; 1 weights offloaded; 2 weights and KV discarded (vLLM's sleep levels)."""
        return max(self._sleep_by_fault, self._sleep_by_call)

    def sleep(self, level: int, *, by_fault: bool = False) -> None:
        """Go to sleep (POST /sleep, or the engine_asleep fault); level 0 is awake."""
        was = self.sleep_level
        if by_fault:
            self._sleep_by_fault = level
        else:
            self._sleep_by_call = level
        if self.sleep_level and not was:
            self._discard_kv()

    def wake_up(self) -> None:
        """POST /wake_up: undoes a sleep by call (a fault's sleep lasts until it is cleared)."""
        self._sleep_by_call = 0

    def _discard_kv(self) -> None:
        # The step in flight never completes and the KV cache is freed: running requests go
        # back to the queue and recompute after the wake-up. (vLLM crashes when put to sleep
        # under load, vllm#45520; the simulator keeps the requests so the state is sleep.)
        self._step = None
        for req in reversed(list(self.running)):
            self._requeue(req)

    def _hold_for_transfer(self, now: float) -> None:
        """Keep features.hold_deferred requests waiting for a KV transfer; release the rest."""
        for rid, req in list(self._held.items()):
            if req.done:
                del self._held[rid]
        target = self.features.hold_deferred
        while len(self._held) > target:
            rid = next(iter(self._held))
            del self._held[rid]
            self._transferred.add(rid)
        if self.knobs.dead:
            return
        while len(self._held) < target:
            output = self.features.hold_output_tokens
            req = self.submit(
                prompt_tokens=self.features.hold_prompt_tokens,
                max_tokens=output,
                target_tokens=output,
                arrival=now,
                client=KV_TRANSFER_CLIENT,
            )
            self._held[req.id] = req

    def running_adapters(self) -> list[str]:
        """The LoRA adapters of running requests, in the order they started running."""
        if not self._adapter:
            return []
        seen: dict[str, None] = {}
        for req in self.running:
            adapter = self._adapter.get(req.id)
            if adapter is not None:
                seen.setdefault(adapter)
        return list(seen)

    def waiting_adapters(self) -> list[str]:
        if not self._adapter:
            return []
        seen: dict[str, None] = {}
        for req in self.waiting:
            adapter = self._adapter.get(req.id)
            if adapter is not None:
                seen.setdefault(adapter)
        return list(seen)

    def _record_lora(self, at: float) -> None:
        self.stats.record_lora(
            running=",".join(self.running_adapters()),
            waiting=",".join(self.waiting_adapters()),
            wall=self.stats.created_wall + (at - self._started),
        )

    # -- what the metrics read -------------------------------------------------------------

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def kv_usage(self) -> float:
        return self.pool.usage

    def waiting_by_reason(self) -> tuple[int, int]:
        """(capacity, deferred): waiting for blocks or a slot, or passed over by the
        scheduler for a transient constraint (vllm:num_requests_waiting_by_reason)."""
        if not self._held and not self._adapter:
            return len(self.waiting), 0
        adapters = self.running_adapters()
        deferred = sum(1 for req in self.waiting if self._deferred(req, adapters))
        return len(self.waiting) - deferred, deferred


def _timing(req: EngineRequest, reason: str, at: float) -> FinishTiming:
    common = {
        "reason": reason,
        "prompt_tokens": req.prompt_tokens,
        "output_tokens": req.output_tokens,
        "max_tokens": req.max_tokens,
        "e2e_s": at - req.arrival,
    }
    if req.first_token_at is None or req.scheduled_at is None:
        return FinishTiming(**common)
    return FinishTiming(
        **common,
        queue_s=req.scheduled_at - req.arrival,
        inference_s=at - req.scheduled_at,
        prefill_s=req.first_token_at - req.scheduled_at,
        decode_s=at - req.first_token_at,
    )
