"""The version facts of data/vllm_changes.yaml, loaded once, and the questions the diff asks of
them: which metric names a release exposes, which flag and default changes fall between two
releases. Plain Python; versions are compared as numbers ("0.10" > "0.9")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from core.i18n import later

DATA = Path(__file__).with_name("data") / "vllm_changes.yaml"

Version = tuple[int, int, int]
_VERSION = re.compile(r"^v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?(?:(?:\.|\+|-|rc|post|dev)[0-9A-Za-z.+\-]*)?$")
_HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")


class VersionError(ValueError):
    """Text that is not a vLLM version, or one the console knows nothing of. args[0] is a
    core.i18n message: str() is English, .translated() the reader's language."""


def parse_version(text: str) -> Version:
    """(major, minor, patch) from "0.11.2", "v0.8.5", "0.10" or "0.10.2.dev378+g4d7fe40fc"."""
    match = _VERSION.match((text or "").strip())
    if not match:
        raise VersionError(later("%(version)s is not a vLLM version like 0.11.2", version=repr(text)))
    return int(match[1]), int(match[2]), int(match[3] or 0)


def label(version: Version) -> str:
    return ".".join(str(part) for part in version)


def checked_version(text: str) -> Version:
    """parse_version, refusing versions older than the table knows."""
    version = parse_version(text)
    oldest = table().oldest
    if version < oldest:
        raise VersionError(
            later(
                "vLLM %(version)s is older than %(oldest)s, the oldest release the console knows",
                version=text.strip(),
                oldest=label(oldest),
            )
        )
    return version


def metric_base(name: str) -> str:
    """A series name as the table keys it: a histogram's _bucket, _sum or _count dropped."""
    for part in _HISTOGRAM_PARTS:
        if name.endswith(part):
            return name[: -len(part)]
    return name


class Exposure(StrEnum):
    PRESENT = "present"
    DEPRECATED = "deprecated"  # still exposed, HELP says DEPRECATED
    HIDDEN = "hidden"  # exposed only with --show-hidden-metrics-for-version
    REMOVED = "removed"
    NOT_YET = "not_yet"  # a later release adds it
    UNKNOWN = "unknown"  # the table has no fact about it

    @property
    def exposed(self) -> bool:
        return self in (Exposure.PRESENT, Exposure.DEPRECATED)


@dataclass(frozen=True)
class MetricFact:
    id: str
    name: str
    since: Version | None = None
    deprecated: Version | None = None
    hidden: Version | None = None
    removed: Version | None = None
    replacement: str = ""
    unit_change: bool = False
    escape_flag: str = ""
    escape_in: tuple[tuple[int, int], ...] = ()  # the minor releases where the escape hatch works
    certainty: str = "source"
    sources: tuple[str, ...] = ()
    note: str = ""

    def exposure(self, version: Version) -> Exposure:
        if self.since is not None and version < self.since:
            return Exposure.NOT_YET
        if self.removed is not None and version >= self.removed:
            return Exposure.REMOVED
        if self.hidden is not None and version >= self.hidden:
            return Exposure.HIDDEN
        if self.deprecated is not None and version >= self.deprecated:
            return Exposure.DEPRECATED
        return Exposure.PRESENT

    def escape_hatch(self, version: Version) -> str:
        """The flag that brings a hidden metric back on `version`, or ""."""
        if self.exposure(version) is Exposure.HIDDEN and version[:2] in self.escape_in:
            return self.escape_flag
        return ""

    def change_version(self, old: Version, new: Version) -> Version | None:
        """The release in (old, new] at which the metric stops being exposed by default."""
        for step in (self.hidden, self.removed):
            if step is not None and old < step <= new:
                return step
        return None


@dataclass(frozen=True)
class Change:
    """A flag or default change at `version`."""

    id: str
    kind: str  # flags: added, deprecated, removed, meaning, env; defaults: default
    subject: str  # the flag, variable or setting
    version: Version
    replacement: str = ""
    before: str = ""
    after: str = ""
    sizing: bool = False
    certainty: str = "source"
    sources: tuple[str, ...] = ()
    note: str = ""

    @property
    def version_label(self) -> str:
        return label(self.version)

    def within(self, old: Version, new: Version) -> bool:
        return old < self.version <= new


@dataclass(frozen=True)
class Table:
    oldest: Version
    stable_since: Version
    stable: frozenset[str]
    stable_sources: tuple[str, ...]
    metrics: dict[str, MetricFact] = field(default_factory=dict)  # by metric name
    flags: tuple[Change, ...] = ()
    defaults: tuple[Change, ...] = ()

    def metric(self, name: str) -> MetricFact | None:
        return self.metrics.get(metric_base(name))

    def exposure(self, name: str, version: Version) -> Exposure:
        base = metric_base(name)
        fact = self.metrics.get(base)
        if fact is not None:
            return fact.exposure(version)
        if base in self.stable:
            return Exposure.PRESENT if version >= self.stable_since else Exposure.NOT_YET
        return Exposure.UNKNOWN

    def flag_changes(self, old: Version, new: Version) -> list[Change]:
        return [c for c in self.flags if c.within(old, new)]

    def default_changes(self, old: Version, new: Version) -> list[Change]:
        return [c for c in self.defaults if c.within(old, new)]

    def every_id(self) -> list[str]:
        return [*(m.id for m in self.metrics.values()), *(c.id for c in self.flags + self.defaults)]

    def every_source(self) -> list[str]:
        sources = list(self.stable_sources)
        for fact in (*self.metrics.values(), *self.flags, *self.defaults):
            sources += fact.sources
        return sources


def _version(value: Any) -> Version | None:
    return None if value in (None, "") else parse_version(str(value))


def _minor(text: str) -> tuple[int, int]:
    major, minor, _patch = parse_version(text)
    return major, minor


def _metric(entry: dict[str, Any]) -> MetricFact:
    hatch = entry.get("escape_hatch") or {}
    return MetricFact(
        id=entry["id"],
        name=entry["name"],
        since=_version(entry.get("since")),
        deprecated=_version(entry.get("deprecated")),
        hidden=_version(entry.get("hidden")),
        removed=_version(entry.get("removed")),
        replacement=entry.get("replacement", ""),
        unit_change=bool(entry.get("unit_change")),
        escape_flag=hatch.get("flag", ""),
        escape_in=tuple(_minor(str(v)) for v in hatch.get("in", ())),
        certainty=entry.get("certainty", "source"),
        sources=tuple(entry.get("sources", ())),
        note=" ".join(str(entry.get("note", "")).split()),
    )


def _change(entry: dict[str, Any], kind: str | None = None) -> Change:
    return Change(
        id=entry["id"],
        kind=kind or entry["change"],
        subject=entry.get("flag") or entry.get("setting", ""),
        version=parse_version(str(entry["version"])),
        replacement=entry.get("replacement", ""),
        before=str(entry.get("before", "")),
        after=str(entry.get("after", "")),
        sizing=bool(entry.get("sizing")),
        certainty=entry.get("certainty", "source"),
        sources=tuple(entry.get("sources", ())),
        note=" ".join(str(entry.get("note", "")).split()),
    )


def load(path: Path = DATA) -> Table:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    stable = data["stable_metrics"]
    metrics = [_metric(entry) for entry in data["metrics"]]
    return Table(
        oldest=parse_version(str(data["oldest"])),
        stable_since=parse_version(str(stable["since"])),
        stable=frozenset(stable["names"]),
        stable_sources=tuple(stable["sources"]),
        metrics={m.name: m for m in metrics},
        flags=tuple(sorted((_change(e) for e in data["flags"]), key=lambda c: c.version)),
        defaults=tuple(sorted((_change(e, "default") for e in data["defaults"]), key=lambda c: c.version)),
    )


@cache
def table() -> Table:
    return load()
