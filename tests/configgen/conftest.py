"""Fixtures of the config generator tests: simulators on free loopback ports, an engineer's
client."""

import pytest

from tests.simulator.conftest import simulate  # noqa: F401


@pytest.fixture
def engineer(client, cast):
    client.force_login(cast.engineer)
    return client
