"""Fixtures of the sizing tests: the probe tests' settings, for the capacity check that reads
what the probes stored."""

from tests.fleet.conftest import quick_settings  # noqa: F401
