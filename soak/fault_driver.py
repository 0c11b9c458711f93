"""Faults cycling through the simulated fleet, through the simulator's control port (the
routes `manage.py fault` uses).

Every `every_s` seconds one instance that has no fault gets one, of a kind drawn in turn
from every kind the simulator knows, for 20 to 90 seconds. Half of them carry duration_s
and clear themselves (the simulator's expiry: a crash restarts, a closed port opens); the
driver clears the other half itself with DELETE when their time is up. At most
`max_faulted` instances have a fault at once, so most of the fleet stays healthy."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx

# Parameters kept modest: a 20 MB metrics page on every scrape would measure the disk, not a leak.
FAULTS: dict[str, dict] = {
    "slow_prefill": {"factor": 4},
    "tps_drop": {"factor": 3},
    "kv_near_full": {"fraction": 0.95},
    "queue_backlog": {"n": 50},
    "refuse_connections": {},
    "hang": {},
    "slow_headers": {"delay_s": 3},
    "http_500": {"fraction": 0.5},
    "http_503": {"fraction": 1.0},
    "rate_limited": {"fraction": 0.5, "retry_after_s": 2},
    "crash": {},
    "malformed_metrics": {},
    "huge_metrics": {"size_mb": 3},
    "gpu_xid": {"xid": 79},
    "engine_dead": {},
    "engine_stall": {},
    "engine_asleep": {"level": 1},
    "waiting_deferred": {"n": 20},
    "prefix_cache_collapse": {"keep": 0.02},
    "spec_decode_low_acceptance": {"acceptance": 0.05},
    "lora_starving": {},
}
LIFE_S = (20.0, 90.0)
TIMEOUT_S = 15.0


@dataclass
class _Active:
    name: str
    kind: str
    clear_at: float
    self_clearing: bool


@dataclass
class FaultStats:
    injected: Counter = field(default_factory=Counter)
    cleared: int = 0
    errors: list[str] = field(default_factory=list)


class FaultDriver(threading.Thread):
    def __init__(
        self, *, control_url: str, names: list[str], every_s: float, max_faulted: int, seed: int = 0
    ) -> None:
        super().__init__(name="soak-faults", daemon=True)
        self.control_url = control_url.rstrip("/")
        self.names = names
        self.every_s = every_s
        self.max_faulted = max(1, max_faulted)
        self.stats = FaultStats()
        self._rng = random.Random(seed)
        self._kinds = list(FAULTS)
        self._next_kind = 0
        self._active: dict[str, _Active] = {}
        self._stopping = threading.Event()
        self._client = httpx.Client(timeout=TIMEOUT_S)

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        while not self._stopping.wait(self.every_s):
            self._clear_due(time.monotonic())
            if len(self._active) < self.max_faulted:
                self._inject()
        self.clear_all()

    def _inject(self) -> None:
        name = self._rng.choice([n for n in self.names if n not in self._active])
        kind = self._kinds[self._next_kind % len(self._kinds)]
        self._next_kind += 1
        life = self._rng.uniform(*LIFE_S)
        self_clearing = self._rng.random() < 0.5
        body = {"kind": kind, **FAULTS[kind]} | ({"duration_s": life} if self_clearing else {})
        if self._call("POST", name, json=body):
            self.stats.injected[kind] += 1
            self._active[name] = _Active(name, kind, time.monotonic() + life, self_clearing)

    def _clear_due(self, now: float) -> None:
        for fault in [f for f in self._active.values() if f.clear_at <= now]:
            del self._active[fault.name]
            if not fault.self_clearing and self._call("DELETE", fault.name, params={"kind": fault.kind}):
                self.stats.cleared += 1

    def clear_all(self) -> None:
        """Every fault the driver set, cleared now: the soak drains on a healthy fleet."""
        for fault in list(self._active.values()):
            if self._call("DELETE", fault.name):
                self.stats.cleared += 1
        self._active.clear()

    def _call(self, method: str, name: str, **kwargs) -> bool:
        url = f"{self.control_url}/_sim/instances/{quote(name, safe='')}/faults"
        try:
            response = self._client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            self.stats.errors.append(f"{method} {name}: {type(exc).__name__}: {exc}")
            return False
        if response.status_code >= 400:
            self.stats.errors.append(f"{method} {name}: HTTP {response.status_code} {response.text[:200]}")
            return False
        return True
