"""Background traffic: Poisson arrivals from named load streams, into an engine.

An instance has a baseline stream (its spec's load) and scenarios add or change others by
name ("long-doc-summaries", "batch-surge"). Inter-arrival times are exponential, so the
arrivals over any interval are Poisson; prompt and output lengths are gamma-distributed
around the stream's means. Each request comes from one of the stream's client IPs, and
the per-client counts are kept for the access log a gateway would have.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from fleet.simulator.engine import Engine, EngineRequest
from fleet.simulator.spec import LoadProfile

BACKLOG_CLIENT = "sim-backlog"


@dataclass
class _Stream:
    profile: LoadProfile
    next_arrival: float


class Traffic:
    def __init__(self, *, engine: Engine, max_model_len: int, seed: int, now: float) -> None:
        self.engine = engine
        self.max_model_len = max_model_len
        self.rng = random.Random(seed)
        self.streams: dict[str, _Stream] = {}
        self.clients: Counter[str] = Counter()
        self._now = now
        self.on_finish: Callable[[EngineRequest], None] | None = None  # e.g. an access log

    def set_stream(self, profile: LoadProfile, *, now: float) -> None:
        """Start, change or (requests_per_s 0) stop a stream."""
        if profile.requests_per_s <= 0:
            self.streams.pop(profile.stream, None)
            return
        self.streams[profile.stream] = _Stream(profile, now + self._gap(profile))

    def profiles(self) -> list[LoadProfile]:
        return [s.profile for s in self.streams.values()]

    def generate(self, now: float) -> int:
        """Submit every arrival due by `now`; returns how many."""
        count = 0
        for stream in self.streams.values():
            while stream.next_arrival <= now:
                self._submit(stream.profile, arrival=stream.next_arrival)
                stream.next_arrival += self._gap(stream.profile)
                count += 1
        self._now = now
        return count

    def inject(self, *, count: int, prompt_tokens: int, output_tokens: int, now: float) -> None:
        """A burst of requests at once (the queue_backlog fault)."""
        profile = LoadProfile(
            mean_prompt_tokens=prompt_tokens, mean_output_tokens=output_tokens, clients=(BACKLOG_CLIENT,)
        )
        for _ in range(count):
            self._submit(profile, arrival=now)

    def _gap(self, profile: LoadProfile) -> float:
        return self.rng.expovariate(profile.requests_per_s) if profile.requests_per_s > 0 else float("inf")

    def _submit(self, profile: LoadProfile, *, arrival: float) -> None:
        max_tokens = min(profile.effective_max_tokens, self.max_model_len // 2)
        shape = 1 / profile.spread**2
        prompt = self._length(profile.mean_prompt_tokens, shape=shape, top=self.max_model_len - max_tokens)
        natural = self._length(profile.mean_output_tokens, shape=shape, top=max_tokens)
        client = self.rng.choice(profile.clients)
        self.clients[client] += 1
        self.engine.submit(
            prompt_tokens=prompt,
            max_tokens=max_tokens,
            target_tokens=natural,
            arrival=arrival,
            client=client,
            cached_tokens=int(prompt * profile.prefix_hit_rate),
            deadline=arrival + profile.timeout_s if profile.timeout_s else None,
            listener=self._finished,
        )

    def _finished(self, req: EngineRequest) -> None:
        if req.done and self.on_finish is not None:
            self.on_finish(req)

    def _length(self, mean: int, *, shape: float, top: int) -> int:
        return max(1, min(top, round(self.rng.gammavariate(shape, mean / shape))))
