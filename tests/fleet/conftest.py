"""Fixtures for the probe tests: quick probe settings and the real simulator."""

import pytest

from fleet.models import ProbeSettings
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.spec import specs_from_inventory


@pytest.fixture
def quick_settings(db):
    settings = ProbeSettings.current()
    settings.read_timeout_s, settings.total_deadline_s, settings.down_after_failures = 2.0, 4.0, 2
    settings.save()
    return settings


@pytest.fixture
def simulator():
    """Start the simulator for whatever loopback instances the test has put in the inventory."""
    started = []

    def start() -> SimulatorThread:
        thread = SimulatorThread(specs_from_inventory())
        thread.__enter__()
        started.append(thread)
        return thread

    yield start
    for thread in started:
        thread.stop()
