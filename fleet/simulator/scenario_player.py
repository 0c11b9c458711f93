"""Plays a scenario's timeline against running instances, in (compressed) real time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from fleet.simulator.faults import FaultKind, parse_fault
from fleet.simulator.scenarios import Scenario, ScenarioEvent

logger = logging.getLogger(__name__)


async def play(
    scenario: Scenario, runner: Any, *, on_event: Callable[[ScenarioEvent, str], None] | None = None
) -> None:
    """Apply each timeline event when its (scaled) time comes; returns after the last one."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    for event in scenario.timeline:
        delay = started + scenario.real_seconds(event.at_s) - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        summary = apply_event(event, runner, time_scale=scenario.time_scale)
        logger.debug("scenario %s at %s: %s", scenario.name, event.label, summary)
        if on_event is not None:
            on_event(event, summary)


def apply_event(event: ScenarioEvent, runner: Any, *, time_scale: float) -> str:
    """Apply one event to its target instances; returns a one-line summary."""
    for name in event.targets:
        inst = runner.instance(name)
        if event.load is not None:
            inst.traffic.set_stream(event.load, now=inst.clock())
        elif event.fault is not None:
            inst.add_fault(parse_fault(event.fault, now=inst.clock(), time_scale=time_scale))
        elif event.clear_faults is not None:
            inst.clear_faults(None if event.clear_faults == "all" else FaultKind(event.clear_faults))
    return f"{', '.join(event.targets)}: {_describe(event)}"


def _describe(event: ScenarioEvent) -> str:
    if event.load is not None:
        load = event.load
        if load.requests_per_s <= 0:
            return f"load stream {load.stream} stops"
        return (
            f"load stream {load.stream} at {load.requests_per_s:g} req/s, "
            f"~{load.mean_prompt_tokens} prompt / {load.mean_output_tokens} output tokens"
        )
    if event.fault is not None:
        params = ", ".join(f"{k}={v}" for k, v in event.fault.items() if k != "kind")
        return f"fault {event.fault['kind']}" + (f" ({params})" if params else "")
    return f"clear faults: {event.clear_faults}"
