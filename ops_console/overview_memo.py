"""What the overview works out once rather than once per tile, chip or link: the URLs it
links to, and the words its tiles repeat in the active language."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from urllib.parse import urlencode

from django.urls import get_script_prefix, reverse
from django.utils.timesince import timesince

from diagnostics.models import CapacityFinding
from fleet.shown_state import state_label
from ops_console.overview_query import TileRow

DAY_S = 24 * 60 * 60


@lru_cache(maxsize=4)
def _path(prefix: str) -> str:
    """The overview's path under the script prefix (reversed once, not once per link)."""
    return reverse("fleet:overview")


@lru_cache(maxsize=4096)
def overview_url(prefix: str, state: str, host: str, page: str) -> str:
    """Built once per filter and process: a page links every healthy host by name."""
    values = {"state": state, "host": host, "page": page if page != "1" else ""}
    query = urlencode({k: v for k, v in values.items() if v})
    return f"{_path(prefix)}{'?' if query else ''}{query}"


class Said:
    """The words tiles repeat (state labels, engine names, "5 minutes"), each worked out once
    per answer in the active language rather than once per tile."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._labels: dict[tuple, str] = {}
        self._engines: dict[str, str] = {}
        self._since: dict[int, str] = {}

    def label(self, instance: TileRow) -> str:
        shown, state = instance.shown, instance.state
        if shown in ("stale", "maintenance"):
            key: tuple = (shown,)
        else:
            key = (instance.enabled, state and state.verdict, state and state.consecutive_failures)
        found = self._labels.get(key)
        if found is None:
            found = self._labels[key] = state_label(shown) if len(key) == 1 else instance.state_text
        return found

    def engine(self, instance: TileRow) -> str:
        found = self._engines.get(instance.engine)
        if found is None:
            found = self._engines[instance.engine] = instance.get_engine_display()
        return found

    def severity(self, severity: str) -> str:
        found = self._labels.get(("severity", severity))
        if found is None:
            known = severity in CapacityFinding.Severity.values
            found = str(CapacityFinding.Severity(severity).label) if known else severity
            self._labels[("severity", severity)] = found
        return found

    def since(self, then: datetime) -> str:
        """timesince(then, now); under a day it reads whole minutes only, so one per minute."""
        seconds = (self.now - then).total_seconds()
        if seconds >= DAY_S:
            return timesince(then, self.now)
        minutes = max(0, int(seconds // 60))
        found = self._since.get(minutes)
        if found is None:
            found = self._since[minutes] = timesince(then, self.now)
        return found


class Links:
    """Instance and host pages, reversed once per answer rather than once per tile."""

    MARK = "2147483647"

    def __init__(self) -> None:
        self._instance = reverse("fleet:instance-detail", args=[int(self.MARK)])
        self._host = reverse("fleet:host-detail", args=[int(self.MARK)])
        self._prefix = get_script_prefix()

    def host_tiles(self, name: str) -> str:
        """The overview filtered to the host: Filter(host=name).url()."""
        return overview_url(self._prefix, "", name, "")

    def instance(self, pk: int) -> str:
        return self._instance.replace(self.MARK, str(pk))

    def host(self, pk: int) -> str:
        return self._host.replace(self.MARK, str(pk))
