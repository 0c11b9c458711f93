"""Fixtures of the sizing tests: the shipped catalogue in the database, and the probe
tests' settings for the capacity check that reads what the probes stored."""

import pytest

from tests.fleet.conftest import quick_settings  # noqa: F401


@pytest.fixture(autouse=True)
def _shipped_catalogue(request):
    """Migrate seeds the catalogue, but a transactional test elsewhere flushes every table
    afterwards; put the shipped models back for tests that use the database."""
    if request.node.get_closest_marker("django_db"):
        from diagnostics.catalogue_seed import seed_shipped
        from diagnostics.models import ModelSpec

        seed_shipped(ModelSpec)
