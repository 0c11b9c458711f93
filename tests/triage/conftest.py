"""Fixtures of the triage tests: simulators on free loopback ports."""

from tests.simulator.conftest import simulate  # noqa: F401
