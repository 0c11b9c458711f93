"""Fixtures for the simulator tests: simulators on free loopback ports, stepped engines."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import httpx
import pytest

from fleet.simulator.engine import Engine
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.instance import new_engine
from fleet.simulator.spec import InstanceSpec


@pytest.fixture
def simulate() -> Iterator[Callable[..., SimulatorThread]]:
    """simulate(spec, ...) starts a SimulatorThread (ports chosen by the OS); all stop after the test."""
    started: list[SimulatorThread] = []

    def start(*specs: InstanceSpec, **options) -> SimulatorThread:
        sim = SimulatorThread(list(specs), **options)
        sim.__enter__()
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()


class SteppedClock:
    """Simulated time that only moves when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def run(self, engine: Engine, *, seconds: float, dt: float = 0.005) -> None:
        end = self.now + seconds
        while self.now < end:
            self.now += dt
            engine.advance(self.now)

    def run_until(
        self, engine: Engine, done: Callable[[], bool], *, limit_s: float = 600, dt: float = 0.005
    ) -> None:
        end = self.now + limit_s
        while not done():
            if self.now > end:
                raise AssertionError(f"not done after {limit_s} simulated seconds")
            self.now += dt
            engine.advance(self.now)


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock()


def engine_for(**fields) -> Engine:
    """An engine built the way an instance builds it, from spec fields."""
    return new_engine(InstanceSpec(name=fields.pop("name", "engine-under-test"), **fields), now=0.0)


def free_port_pair() -> int:
    """A port p such that p and p + 1 are free right now."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise RuntimeError("no two consecutive free ports")


def wait_for(predicate: Callable[[], bool], *, timeout_s: float = 5.0, what: str = "the condition") -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.01)


def health_status(url: str) -> int | str | None:
    """GET {url}/health: the status code, or None once the port refuses connections. A
    connection the closing listener had already accepted may be dropped without a response:
    that is neither state yet, and polling goes on."""
    try:
        return httpx.get(url + "/health", timeout=2).status_code
    except httpx.ConnectError:
        return None
    except (httpx.RemoteProtocolError, httpx.ReadError):
        return "dropped while closing"
