"""A bound on calls that must end: a test that feeds outside bytes to a parser fails,
instead of hanging the suite, when the parser loops forever."""

from __future__ import annotations

import threading

import pytest

# Far above any honest parse of the bounded inputs the tests give: a call still running
# after this is a hang (an endless loop), not a slow parse. Speed itself is measured in
# `make bench`, never here.
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
