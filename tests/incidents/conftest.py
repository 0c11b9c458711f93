"""Fixtures of the incident tests: the probe tests' quick settings."""

from tests.fleet.conftest import quick_settings  # noqa: F401
