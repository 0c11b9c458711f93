"""The Alertmanager receiver under load: how fast it answers 50 payloads sent at once, and how
long one payload of 1,000 alerts takes from the POST until a worker has processed it.

gunicorn (two processes of four threads) and a Celery worker (two processes) run as the
Procfile runs them, each in its own process: on the embedded default (SQLite, the filesystem
broker), then on PostgreSQL when one is reachable (Redis as the broker when reachable).
Each round's alerts are new, so every payload is real work. Aim: p99 answer under 1 s.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from benchmarks import services

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TOKEN = "bench-alertmanager-token-0123456789"
URL = "/incidents/alertmanager/"
GROUPS = 5
NAMES = ("NodeDiskFull", "GPUTemperatureHigh", "VLLMHighTTFT")  # three categories


# --- the console's processes ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROCFILE = {  # as the Procfile runs them
    "web": ["gunicorn", "ops_console.wsgi", "--workers", "2", "--threads", "4"],
    "worker": ["celery", "-A", "ops_console", "worker", "--loglevel", "WARNING", "--concurrency", "2",
               "--queues", "console", "--without-gossip", "--without-mingle"],
}  # fmt: skip


def _start(env: dict[str, str], port: int) -> list[subprocess.Popen]:
    commands = [[str(BIN / c[0]), *c[1:]] for c in PROCFILE.values()]
    commands[0] += ["--bind", f"127.0.0.1:{port}"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    return [subprocess.Popen(c, cwd=ROOT, env=env, start_new_session=True, **quiet) for c in commands]


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _migrate(env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=300)  # fmt: skip


# --- what the worker has done ---------------------------------------------------------------


class Deliveries:
    """Reads the deliveries' rows straight from the database the console writes."""

    def __init__(self, database_url: str) -> None:
        self.url = database_url

    def _one(self, sql: str, *args: object) -> object:
        if self.url.startswith("sqlite"):
            with sqlite3.connect(urlsplit(self.url).path, timeout=30) as db:
                return db.execute(sql.replace("%s", "?"), args).fetchone()[0]
        import psycopg

        with psycopg.connect(self.url) as db:
            return db.execute(sql, args).fetchone()[0]

    def unprocessed(self) -> int:
        return int(self._one("SELECT count(*) FROM incidents_alertdelivery WHERE processed_at IS NULL"))

    def wait(self, *, timeout: float = 300.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.unprocessed() == 0:
                return True
            time.sleep(0.02)
        return False


# --- load -----------------------------------------------------------------------------------


def _alert(name: str, **labels: str) -> dict:
    return {
        "status": "firing",
        "labels": {"alertname": name, "severity": "warning", **labels},
        "annotations": {"summary": f"{name} on {labels}"},
        "startsAt": "2026-12-03T02:58:00.123456789Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
    }


def _payload(alerts: list[dict], group: int) -> dict:
    return {
        "version": "4", "groupKey": f'{{}}:{{team="t{group}"}}', "truncatedAlerts": 0, "status": "firing",
        "receiver": "ops-console", "groupLabels": {"team": f"t{group}"}, "commonLabels": {},
        "commonAnnotations": {}, "externalURL": "http://alertmanager:9093", "alerts": alerts,
    }  # fmt: skip


def _round(tag: str, *, payloads: int, per_payload: int) -> list[dict]:
    return [
        _payload([_alert(NAMES[i % 3], node=f"{tag}-{p}-{i}") for i in range(per_payload)], p % GROUPS)
        for p in range(payloads)
    ]


def _post(client: httpx.Client, payload: dict) -> tuple[float, int]:
    """Seconds until the answer, and its status; a 503 is sent again after its Retry-After, as
    Alertmanager would, and counted in the time."""
    started = time.perf_counter()
    for _ in range(10):
        response = client.post(URL, json=payload)
        if response.status_code != 503:
            break
        time.sleep(float(response.headers.get("Retry-After", "1")))
    return time.perf_counter() - started, response.status_code


def _client(url: str, connections: int) -> httpx.Client:
    """One client for all the senders, keeping its connections open, as Alertmanager's does."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    return httpx.Client(base_url=url, headers=headers, limits=limits, timeout=120)


def _at_once(client: httpx.Client, payloads: list[dict]) -> list[tuple[float, int]]:
    start = threading.Barrier(len(payloads))

    def send(payload: dict) -> tuple[float, int]:
        start.wait()
        return _post(client, payload)

    with ThreadPoolExecutor(max_workers=len(payloads)) as pool:
        return list(pool.map(send, payloads))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _measure(name: str, env: dict[str, str], database_url: str, **load: int) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    deliveries = Deliveries(database_url)
    processes = _start(env, port)
    client = _client(url, load["payloads"])
    try:
        deadline = time.monotonic() + 60
        while _status(url) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        _at_once(client, _round("warm", payloads=8, per_payload=2))  # every gunicorn thread and the worker up
        if not deliveries.wait(timeout=120):
            print(f"  {name}: the worker processed nothing within 120 s")
            return
        print(f"  {name}:")
        _bursts(client, deliveries, **{k: load[k] for k in ("payloads", "per_payload", "rounds")})
        _big(client, deliveries, alerts=load["big"])
    finally:
        client.close()
        _stop(processes)


def _bursts(
    client: httpx.Client, deliveries: Deliveries, *, payloads: int, per_payload: int, rounds: int
) -> None:
    answers, through = [], []
    for r in range(rounds):
        started = time.perf_counter()
        answers += _at_once(client, _round(f"r{r}", payloads=payloads, per_payload=per_payload))
        deliveries.wait()
        through.append(time.perf_counter() - started)
    latencies = [seconds for seconds, _ in answers]
    p50, p99 = (_percentile(latencies, q) * 1000 for q in (0.5, 0.99))
    failed = sum(1 for _, status in answers if status != 200)
    worst = max(latencies) * 1000
    print(f"    {payloads} payloads of {per_payload} alerts at once, {rounds} rounds: answer "
          f"p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {worst:.0f} ms (aim: p99 < 1 s); "
          f"not 200: {failed}")  # fmt: skip
    rounds_s = ", ".join(f"{t:.2f}" for t in through)
    print(f"    a round's {payloads * per_payload} alerts processed {min(through):.2f} s after they "
          f"were sent (best round; all: {rounds_s})")  # fmt: skip


def _big(client: httpx.Client, deliveries: Deliveries, *, alerts: int) -> None:
    started = time.perf_counter()
    answered, status = _post(client, _round("big", payloads=1, per_payload=alerts)[0])
    deliveries.wait()
    took = time.perf_counter() - started
    print(f"    one payload of {alerts} alerts: answered in {answered * 1000:.0f} ms ({status}), "
          f"processed {took:.2f} s after it was sent")  # fmt: skip


def _status(url: str) -> int | None:
    try:
        return httpx.get(url + URL, timeout=2).status_code
    except httpx.HTTPError:
        return None


# --- the databases --------------------------------------------------------------------------


def _create_database(url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as db:
        if not db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            db.execute(f'CREATE DATABASE "{name}"')


def _empty_alert_tables(url: str) -> None:
    import psycopg

    tables = "incidents_alertdelivery, incidents_receivedalert, incidents_timelineentry, incidents_incident"
    with psycopg.connect(url) as db:
        db.execute(f"TRUNCATE {tables} CASCADE")


def run(*, payloads: int, per_payload: int, rounds: int, big: int, postgres_url: str, redis_url: str) -> int:
    print(f"alert receiver benchmark: {payloads} payloads of {per_payload} alerts at once ({rounds} rounds), "
          f"then one of {big} alerts")  # fmt: skip
    load = {"payloads": payloads, "per_payload": per_payload, "rounds": rounds, "big": big}
    base = {**os.environ, "ALERTMANAGER_TOKEN": TOKEN, "DB_CONN_MAX_AGE": "0", "PYTHONUNBUFFERED": "1"}
    base.pop("DATABASE_URL", None)
    base.pop("CELERY_BROKER_URL", None)
    with tempfile.TemporaryDirectory(prefix="ops-bench-alerts-") as var_dir:
        env = {**base, "OPS_VAR_DIR": var_dir}
        _migrate(env)
        sqlite_url = f"sqlite:///{var_dir}/console.sqlite3"
        _measure("SQLite, filesystem broker", env, sqlite_url, **load)
    if not postgres_url or not services.reachable(postgres_url, 5432):
        print(f"  PostgreSQL: {postgres_url or 'no URL'} not reachable, skipped")
        return 0
    broker = redis_url if redis_url and services.reachable(redis_url, 6379) else ""
    with tempfile.TemporaryDirectory(prefix="ops-bench-alerts-") as var_dir:
        env = {**base, "OPS_VAR_DIR": var_dir, "DATABASE_URL": postgres_url}
        if broker:
            env["CELERY_BROKER_URL"] = broker
        _create_database(postgres_url)
        _migrate(env)
        _empty_alert_tables(postgres_url)
        name = f"PostgreSQL, {'Redis' if broker else 'filesystem'} broker"
        _measure(name, env, postgres_url, **load)
    return 0
