"""A request in an engine as an async HTTP handler sees it: tokens as they come.

The engine calls the request's listener from the ticker (same event loop), which wakes
the handler. Closing a generation that has not finished aborts it in the engine, so a
client that disconnects (aiohttp cancels the handler) frees its slot and KV blocks, and
the request is counted with finished_reason "abort", as vLLM does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fleet.simulator.engine import Engine, EngineRequest, RequestState


class EngineFailed(Exception):
    """The engine died while the request was in it."""


class Generation:
    def __init__(self, engine: Engine, **submit: Any) -> None:
        self.engine = engine
        self._event = asyncio.Event()
        self.req = engine.submit(**submit, listener=self._wake)
        self._seen = 0

    def _wake(self, _req: EngineRequest) -> None:
        self._event.set()

    async def new_tokens(self) -> AsyncIterator[tuple[int, int]]:
        """Yields (start, end) token positions as they are emitted, until the request ends."""
        while True:
            emitted = self.req.output_tokens
            if emitted > self._seen:
                start, self._seen = self._seen, emitted
                yield start, emitted
            if self.req.done:
                break
            await self._event.wait()
            self._event.clear()
        if self.req.state is RequestState.FAILED:
            raise EngineFailed("EngineCore encountered an issue. See stack trace (above) for the root cause.")

    async def wait(self) -> EngineRequest:
        async for _ in self.new_tokens():
            pass
        return self.req

    def close(self) -> None:
        if not self.req.done:
            self.engine.abort(self.req)
