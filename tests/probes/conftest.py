import pytest

from fleet.probes.fetch import make_probe_client
from tests.probes.engines import FAST


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
async def http_client():
    async with make_probe_client(limits=FAST, concurrency=4) as shared:
        yield shared
