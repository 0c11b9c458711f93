"""One drill from start to end: the simulator runs the scenario's instances on free ports,
a scratch inventory points at them, the scenario's timeline plays on its time scale while
the probe loop probes and evaluates, then the expectations are checked and the scratch
inventory is removed (unless kept)."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from django.utils import timezone

from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.scenario_player import play
from fleet.simulator.scenarios import Scenario, ScenarioEvent
from incidents.drills import inventory
from incidents.drills.checks import CheckResult, check, unmet
from incidents.drills.loop import ProbeLoop
from incidents.drills.observed import (
    AppliedFault,
    IncidentSeen,
    Observation,
    incidents_seen,
    observe_states,
    scenario_clock,
)

Progress = Callable[[float, float], None]  # scenario seconds elapsed, total


@dataclass(kw_only=True)
class DrillReport:
    scenario: str
    description: str
    time_scale: float
    probe_interval_s: float
    duration_s: float  # scenario seconds
    real_s: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    incidents: list[IncidentSeen] = field(default_factory=list)
    results: list[CheckResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    kept_hosts: list[str] = field(default_factory=list)

    @property
    def unmet(self) -> list[str]:
        return unmet(self.results) + [f"drill error: {e}" for e in self.errors]

    @property
    def passed(self) -> bool:
        return not self.unmet

    def verdict_changes(self) -> list[Observation]:
        """Each instance's judgements where the verdict or the findings changed."""
        last: dict[str, tuple] = {}
        changes = []
        for obs in sorted(self.observations, key=lambda o: o.at_s):
            key = (obs.verdict, obs.categories)
            if last.get(obs.instance) != key:
                last[obs.instance] = key
                changes.append(obs)
        return changes

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "description": self.description,
            "time_scale": self.time_scale,
            "probe_interval_s": self.probe_interval_s,
            "duration_s": self.duration_s,
            "real_s": round(self.real_s, 1),
            "passed": self.passed,
            "events": self.events,
            "verdicts": [asdict(o) for o in self.verdict_changes()],
            "incidents": [i.to_dict() for i in self.incidents],
            "expectations": [r.to_dict() for r in self.results],
            "unmet": self.unmet,
            "errors": self.errors,
            "kept_hosts": self.kept_hosts,
        }


class _Recorder:
    """Observations and applied events, from the probe threads and the simulator's loop."""

    def __init__(self, *, names: dict[int, str], started: float, time_scale: float) -> None:
        self.names, self.started, self.time_scale = names, started, time_scale
        self.observations: list[Observation] = []
        self.faults: list[AppliedFault] = []
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def now_s(self) -> float:
        return round((time.monotonic() - self.started) * self.time_scale, 1)

    def swept(self, ids: list[int]) -> None:
        found = observe_states(names=self.names, at_s=self.now_s(), ids=ids)
        with self._lock:
            self.observations += found

    def applied(self, event: ScenarioEvent, summary: str) -> None:
        with self._lock:
            self.events.append(
                {"at_s": self.now_s(), "label": event.label, "summary": summary, "note": event.note}
            )
            kind = (event.fault or {}).get("kind") if event.fault else None
            if event.fault is not None or event.clear_faults is not None:
                self.faults += [AppliedFault(at_s=event.at_s, instance=n, kind=kind) for n in event.targets]


def run_drill(*, scenario: Scenario, keep: bool = False, on_progress: Progress | None = None) -> DrillReport:
    """Replay `scenario` through the real probes and alert rules; the report says what was
    seen and which expectations were not met."""
    began = time.monotonic()
    drill = _Drill(scenario=scenario, on_progress=on_progress)
    slots = inventory.gpu_slots(scenario)
    specs = [replace(s, port=0, gpus=slots[s.name]) for s in scenario.instances]
    with SimulatorThread(specs) as sim:
        ports = {s.name: sim.port(s.name) for s in specs}
        drill.names = inventory.make_inventory(scenario=scenario, specs=specs, ports=ports, tag=drill.tag)
        try:
            drill.play_and_probe(sim)
        finally:
            sim.stop()
            drill.finish(keep=keep)
    drill.report.real_s = time.monotonic() - began
    return drill.report


class _Drill:
    def __init__(self, *, scenario: Scenario, on_progress: Progress | None) -> None:
        self.scenario, self.on_progress = scenario, on_progress
        self.tag = secrets.token_hex(3)
        self.total = scenario.drill_end_s
        self.names: dict[int, str] = {}
        self.started_wall = timezone.now()
        self.recorder: _Recorder | None = None
        self._last_progress = 0.0
        self.report = DrillReport(
            scenario=scenario.name,
            description=scenario.description,
            time_scale=scenario.time_scale,
            probe_interval_s=scenario.probe_interval_s,
            duration_s=self.total,
        )

    def play_and_probe(self, sim: SimulatorThread) -> None:
        scenario = self.scenario
        self.started_wall, started = timezone.now(), time.monotonic()
        recorder = self.recorder = _Recorder(
            names=self.names, started=started, time_scale=scenario.time_scale
        )
        player = asyncio.run_coroutine_threadsafe(
            play(scenario, sim.runner, on_event=recorder.applied), sim.loop
        )
        loop = ProbeLoop(
            instance_ids=list(self.names),
            interval_s=scenario.real_seconds(scenario.probe_interval_s),
            time_scale=scenario.time_scale,
            on_sweep=recorder.swept,
        )
        try:
            loop.run_until(deadline=started + scenario.real_seconds(self.total), on_tick=self._progress)
        finally:
            sim.stop()  # closes the ports: probes still waiting on a hang end now
            loop.stop()
            if player.done() and not player.cancelled() and player.exception() is not None:
                self.report.errors.append(f"timeline: {player.exception()}")
            player.cancel()
        self.report.errors += loop.errors
        self.report.observations, self.report.events = recorder.observations, recorder.events

    def _progress(self) -> None:
        if self.on_progress and self.recorder and time.monotonic() - self._last_progress >= 1.0:
            self._last_progress = time.monotonic()
            self.on_progress(min(self.recorder.now_s(), self.total), self.total)

    def finish(self, *, keep: bool) -> None:
        ids, scenario = list(self.names), self.scenario
        hosts = {self._host(n): scenario.host_of(n) for n in self.names.values()}
        if self.recorder is not None:
            incidents = inventory.scratch_incidents(instance_ids=ids).prefetch_related(
                "instances", "timeline"
            )
            self.report.incidents = incidents_seen(
                incidents=list(incidents),
                names=self.names,
                to_scenario_s=scenario_clock(started=self.started_wall, time_scale=scenario.time_scale),
                faults=self.recorder.faults,
                host_names=hosts,
            )
            self.report.results = check(
                expect=scenario.expect, observations=self.report.observations, incidents=self.report.incidents
            )
        if keep:
            self.report.kept_hosts = sorted(hosts)
        else:
            inventory.remove_inventory(instance_ids=ids)

    def _host(self, name: str) -> str:
        return inventory.host_name(tag=self.tag, host=self.scenario.host_of(name))
