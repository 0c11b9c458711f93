"""Steady Alertmanager traffic into the receiver, sent as Alertmanager sends it.

Alerts live in notification groups; each group has its own sender that posts one payload
at a time (Alertmanager never has two notifications of one group in flight), so which
payload the receiver took last for a fingerprint is known. Together the groups send
`rate` payloads a second, each of 5 to 50 of the group's alerts; a third of the alerts
in a payload change state (firing to resolved or back), the rest are resent as they were,
as Alertmanager repeats a group's firing alerts. A quarter of the alerts name an inventory
instance (llm_instance), so they join the console's own incidents.

A 503 is sent again after its Retry-After, a connection error after a second, as
Alertmanager would, up to MAX_ATTEMPTS; any other answer, or running out of attempts, is a
refusal. The ledger keeps the status of each fingerprint as last accepted."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

URL_PATH = "/incidents/alertmanager/"
ALERTNAMES = (
    "VLLMKVCacheNearFull",
    "VLLMHighErrorRate",
    "VLLMHighTTFT",
    "VLLMQueueBacklog",
    "GPUTemperatureHigh",
    "VLLMHighLatency",
    "NodeDiskFull",  # not one of the guide's: category "other"
    "SoakCanary",
)
ALERTS_PER_PAYLOAD = (5, 50)
CHANGE_SHARE = 1 / 3
MAX_ATTEMPTS = 10
TIMEOUT_S = 60.0
ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass
class _Alert:
    labels: dict[str, str]
    fingerprint: str
    starts_at: str
    firing: bool = False


@dataclass
class Ledger:
    """What was sent and what the receiver answered; shared by the senders (under a lock)."""

    last_status: dict[str, str] = field(default_factory=dict)  # fingerprint -> as last accepted
    payloads: int = 0
    accepted: int = 0
    alerts_accepted: int = 0
    retried_503: int = 0
    retried_errors: int = 0
    refused: list[str] = field(default_factory=list)
    answer_s: list[float] = field(default_factory=list)  # the first attempt's answer time
    lock: threading.Lock = field(default_factory=threading.Lock)


def fingerprint_of(labels: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AlertLoad:
    """`groups` sender threads sending `rate` payloads a second in all, until stop()."""

    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        rate: float,
        groups: int,
        alerts_per_group: int,
        instance_names: list[str],
        seed: int = 0,
    ) -> None:
        self.url = base_url.rstrip("/") + URL_PATH
        self.token = token
        self.interval_s = groups / rate
        self.ledger = Ledger()
        self._stopping = threading.Event()
        rng = random.Random(seed)
        self._pools = [self._pool(g, alerts_per_group, instance_names, rng) for g in range(groups)]
        self._threads = [
            threading.Thread(target=self._send_forever, args=(g, seed), name=f"soak-alerts-{g}", daemon=True)
            for g in range(groups)
        ]

    def _pool(self, group: int, size: int, names: list[str], rng: random.Random) -> list[_Alert]:
        pool = []
        for i in range(size):
            labels = {
                "alertname": ALERTNAMES[(group + i) % len(ALERTNAMES)],
                "severity": rng.choice(("warning", "critical", "info")),
                "soak_group": f"g{group}",
                "soak_alert": f"g{group}-a{i}",
            }
            if names and i % 4 == 0:
                labels["llm_instance"] = rng.choice(names)
            alert = _Alert(labels, fingerprint_of(labels), _now(), firing=rng.random() < 0.5)
            pool.append(alert)
        return pool

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, *, timeout_s: float = 120.0) -> None:
        """Stop sending; a payload in flight is finished (retries included) within timeout_s."""
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _send_forever(self, group: int, seed: int) -> None:
        rng = random.Random(seed * 1000 + group)
        client = httpx.Client(timeout=TIMEOUT_S, headers={"Authorization": f"Bearer {self.token}"})
        # the groups start spread over one interval, so the load is steady, not in bursts
        next_at = time.monotonic() + self.interval_s * rng.random()
        while not self._stopping.wait(max(0.0, next_at - time.monotonic())):
            next_at = max(next_at + self.interval_s, time.monotonic())  # late: no catching up in a burst
            self._send(client, group, rng)
        client.close()

    def _send(self, client: httpx.Client, group: int, rng: random.Random) -> None:
        pool = self._pools[group]
        chosen = rng.sample(pool, min(len(pool), rng.randint(*ALERTS_PER_PAYLOAD)))
        for alert in chosen:
            if rng.random() < CHANGE_SHARE:
                alert.firing = not alert.firing
                alert.starts_at = _now() if alert.firing else alert.starts_at
        payload = _payload(group, chosen)
        if self._post(client, payload):
            with self.ledger.lock:
                self.ledger.alerts_accepted += len(chosen)
                for alert in chosen:
                    self.ledger.last_status[alert.fingerprint] = "firing" if alert.firing else "resolved"

    def _post(self, client: httpx.Client, payload: dict) -> bool:
        ledger, body = self.ledger, json.dumps(payload).encode()
        with ledger.lock:
            ledger.payloads += 1
        last = ""
        for attempt in range(MAX_ATTEMPTS):
            started = time.monotonic()
            try:
                response = client.post(self.url, content=body, headers={"Content-Type": "application/json"})
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
                with ledger.lock:
                    ledger.retried_errors += 1
                time.sleep(1.0)
                continue
            if attempt == 0:
                with ledger.lock:
                    ledger.answer_s.append(time.monotonic() - started)
            if 200 <= response.status_code < 300:
                with ledger.lock:
                    ledger.accepted += 1
                return True
            last = f"HTTP {response.status_code}: {response.text[:200]}"
            if response.status_code != 503:
                break
            with ledger.lock:
                ledger.retried_503 += 1
            time.sleep(float(response.headers.get("Retry-After") or 1))
        with ledger.lock:
            ledger.refused.append(last)
        return False


def _payload(group: int, alerts: list[_Alert]) -> dict:
    now = _now()
    return {
        "version": "4",
        "groupKey": f'{{}}:{{soak_group="g{group}"}}',
        "truncatedAlerts": 0,
        "status": "firing" if any(a.firing for a in alerts) else "resolved",
        "receiver": "ops-console",
        "groupLabels": {"soak_group": f"g{group}"},
        "commonLabels": {"soak_group": f"g{group}"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.soak:9093",
        "alerts": [
            {
                "status": "firing" if a.firing else "resolved",
                "labels": a.labels,
                "annotations": {"summary": f"{a.labels['alertname']} in the soak"},
                "startsAt": a.starts_at,
                "endsAt": ZERO_TIME if a.firing else now,
                "generatorURL": "http://prometheus.soak:9090/graph?g0.expr=up",
                "fingerprint": a.fingerprint,
            }
            for a in alerts
        ],
    }
