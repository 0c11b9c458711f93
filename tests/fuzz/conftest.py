"""Fuzz properties over every parser of outside bytes (hypothesis).

Each property says the parser ends within its bound and raises nothing but its own clear
error. `make test` runs the short profile (a fixed seed, so CI does not find a new case by
chance and fail someone else's change); `make fuzz` runs the long one with fresh seeds.
"""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "fuzz",
    max_examples=3000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Far above any honest parse of the bounded inputs here: a call still running after this
# is a hang (an endless loop), not a slow parse. Speed itself is measured in `make bench`.
HANG_S = 10.0


def ends(call, *args, **kwargs):
    """Run call(*args, **kwargs) in a thread; fail the test when it has not ended after
    HANG_S seconds. Returns what it returned, re-raises what it raised."""
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = call(*args, **kwargs)
        except BaseException as exc:  # handed back to the test
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_S)
    if thread.is_alive():
        pytest.fail(f"{getattr(call, '__name__', call)} did not end within {HANG_S} s: a hang", pytrace=False)
    if "error" in result:
        raise result["error"]
    return result.get("value")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/fuzz/" in str(item.fspath):
            item.add_marker(pytest.mark.fuzz)
