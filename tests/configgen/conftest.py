"""Fixtures of the config generator tests: simulators on free loopback ports."""

from tests.simulator.conftest import simulate  # noqa: F401
