"""A request inside the engine, and the knobs faults turn."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class RequestState(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"  # the engine died under it; never reaches the stats


@dataclass(eq=False, kw_only=True)
class EngineRequest:
    id: int
    prompt_tokens: int
    max_tokens: int
    target_tokens: int  # how many tokens it will produce; == max_tokens means "length"
    arrival: float
    client: str = ""
    cached_tokens: int = 0  # prompt tokens the prefix cache can supply
    deadline: float | None = None  # the client gives up at this time (abort)
    listener: Callable[[EngineRequest], None] | None = None
    state: RequestState = RequestState.WAITING
    output_tokens: int = 0
    computed: int = 0  # tokens whose KV is in the cache
    prefill_target: int = 0  # tokens to compute before the next token can be emitted
    blocks: int = 0
    preemptions: int = 0
    scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    finished_at: float | None = None
    finish_reason: str | None = None

    @property
    def in_prefill(self) -> bool:
        return self.computed < self.prefill_target

    @property
    def done(self) -> bool:
        return self.state in (RequestState.FINISHED, RequestState.FAILED)


@dataclass
class EngineKnobs:
    """What faults change in the engine."""

    prefill_factor: float = 1.0  # slow_prefill
    step_factor: float = 1.0  # tps_drop (thermal throttling slows every kernel)
    stalled: bool = False  # engine_stall: no steps, /health still 200
    dead: bool = False  # engine_dead
