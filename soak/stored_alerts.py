"""Whether every alert the receiver accepted was stored, as last sent: read from the console's
database by fingerprint, after the worker has had time to process what was accepted.

An alert counts as stored when a received alert with its fingerprint exists and its status
is the one of the payload the receiver accepted last for it (the receiver keeps the latest
arrival; the soak sends each group's payloads one at a time, so that is the last one sent)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

CHUNK = 500  # fingerprints per query, under SQLite's limit on bound parameters


@dataclass(frozen=True)
class AlertTally:
    sent: int  # distinct fingerprints accepted
    stored: int
    missing: list[str]
    wrong_status: list[tuple[str, str, str]]  # fingerprint, last sent, stored

    @property
    def complete(self) -> bool:
        return not self.missing and not self.wrong_status


def stored_statuses(fingerprints: list[str]) -> dict[str, str]:
    from django.db import connections

    from incidents.models import ReceivedAlert

    found: dict[str, str] = {}
    try:
        for start in range(0, len(fingerprints), CHUNK):
            rows = ReceivedAlert.objects.filter(fingerprint__in=fingerprints[start : start + CHUNK])
            found.update(rows.values_list("fingerprint", "status"))
    finally:
        connections.close_all()
    return found


def tally(expected: dict[str, str], stored: dict[str, str]) -> AlertTally:
    missing = sorted(fp for fp in expected if fp not in stored)
    wrong = sorted(
        (fp, want, stored[fp]) for fp, want in expected.items() if fp in stored and stored[fp] != want
    )
    return AlertTally(
        sent=len(expected), stored=len(expected) - len(missing), missing=missing, wrong_status=wrong
    )


def drain(
    expected: dict[str, str],
    *,
    timeout_s: float,
    read: Callable[[list[str]], dict[str, str]] = stored_statuses,
    every_s: float = 2.0,
) -> tuple[AlertTally, float]:
    """Wait until every expected alert is stored as expected, or timeout_s; the last tally
    and how long it took."""
    started = time.monotonic()
    fingerprints = sorted(expected)
    while True:
        result = tally(expected, read(fingerprints))
        waited = time.monotonic() - started
        if result.complete or waited >= timeout_s:
            return result, waited
        time.sleep(every_s)
