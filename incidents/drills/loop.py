"""The accelerated probe loop: each probe kind on its own cadence (the scenario's probe
interval, divided by its time scale), as beat runs them, and the alert rules evaluated
after each sweep with their durations divided by the same scale.

Each instance is probed on its own thread for each kind, so an instance still being probed
(a hang waits for its timeout) skips that kind's cycle alone, as a beat cycle that is still
running does, while the other instances and kinds keep their cadence: at a time scale of
10 a health interval is 3 s of real time, shorter than a probe's read timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from django.db import close_old_connections, connection

from fleet import probe_service
from fleet.models import Instance, ProbeSettings, Trigger
from fleet.probes.parts import ProbeKind
from incidents.alerting import evaluate
from incidents.models import Source

WORKERS = 16
TICK_S = 0.02


def drill_settings() -> ProbeSettings:
    """The console's thresholds as they are, with timeouts a little shorter so a hanging
    instance does not stall the drill: still longer than the TTFB threshold (5 s) and a
    7 s slow_headers, so slow answers are measured, not cut off. Never saved."""
    settings = ProbeSettings.current()
    settings.connect_timeout_s = min(settings.connect_timeout_s, 2.0)
    settings.read_timeout_s = min(settings.read_timeout_s, 8.0)
    settings.total_deadline_s = min(settings.total_deadline_s, 10.0)
    return settings


class ProbeLoop:
    def __init__(
        self,
        *,
        instance_ids: list[int],
        interval_s: float,
        time_scale: float,
        on_sweep: Callable[[list[int]], None],
        settings: ProbeSettings | None = None,
    ) -> None:
        self.ids = instance_ids
        self.interval_s = interval_s  # real seconds
        self.time_scale = time_scale
        self.on_sweep = on_sweep
        self.settings = settings or drill_settings()
        self.errors: list[str] = []
        self._busy: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._evaluate_wanted = threading.Event()
        self._stopping = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="drill-probe")
        self._evaluator = threading.Thread(target=self._evaluate_forever, name="drill-evaluate", daemon=True)
        self._instances = list(
            Instance.objects.filter(pk__in=instance_ids).select_related("host").prefetch_related("gpus")
        )

    def run_until(self, *, deadline: float, on_tick: Callable[[], None] = lambda: None) -> None:
        """Probe every kind on its cadence until `deadline` (time.monotonic())."""
        self._evaluator.start()
        start = time.monotonic()
        due = dict.fromkeys(ProbeKind, start)
        while (now := time.monotonic()) < deadline:
            for kind, at in due.items():
                if now >= at:
                    self._start_sweep(str(kind))
                    missed = int((now - at) // self.interval_s)
                    due[kind] = at + (missed + 1) * self.interval_s
            on_tick()
            time.sleep(TICK_S)

    def stop(self) -> None:
        """Wait for the sweeps in flight (stop the simulator first: its closed ports end
        them) and the last evaluation."""
        self._pool.shutdown(wait=True)
        self._stopping.set()
        self._evaluate_wanted.set()
        if self._evaluator.is_alive():
            self._evaluator.join(timeout=60)

    def _start_sweep(self, kind: str) -> None:
        with self._lock:
            chosen = [i for i in self._instances if (kind, i.pk) not in self._busy]
            self._busy.update((kind, i.pk) for i in chosen)
        for instance in chosen:
            future = self._pool.submit(self._sweep, kind, [instance])
            future.add_done_callback(lambda f, k=kind, c=[instance]: self._done(f, k, c))

    def _sweep(self, kind: str, chosen: list[Instance]) -> None:
        close_old_connections()
        try:
            probe_service.sweep(instances=chosen, kind=kind, settings=self.settings, trigger=Trigger.SCHEDULE)
            self.on_sweep([i.pk for i in chosen])
        finally:
            connection.close()

    def _done(self, future: Future, kind: str, chosen: list[Instance]) -> None:
        with self._lock:
            self._busy.difference_update((kind, i.pk) for i in chosen)
        if future.exception() is not None:
            self.errors.append(f"{kind} sweep: {type(future.exception()).__name__}: {future.exception()}")
        self._evaluate_wanted.set()

    def _evaluate_forever(self) -> None:
        try:
            while not self._stopping.is_set():
                self._evaluate_wanted.wait()
                self._evaluate_wanted.clear()
                if self._stopping.is_set():
                    break
                try:
                    self.evaluate_once()
                except Exception as exc:  # noqa: BLE001 - reported, the drill goes on
                    self.errors.append(f"evaluation: {type(exc).__name__}: {exc}")
        finally:
            connection.close()

    def evaluate_once(self) -> None:
        instances = list(Instance.objects.filter(pk__in=self.ids).select_related("state", "host"))
        evaluate(instances=instances, duration_scale=self.time_scale, source=Source.DRILL)
