"""The advisory database the dependency audit reads: one JSON file that `advisory_fetch`
writes from what the package registry serves and `dependency_audit` reads offline.

    {"format": 1,
     "sources": [{"key": "pypi", "title": "...", "date": "2026-12-04",
                  "covers": {"django": {"version": "6.1.3", "date": "2026-12-04"}}}, ...],
     "advisories": [{"source": "pypi", "package": "django", "id": "PYSEC-...",
                     "aliases": ["CVE-..."], "affected": ["==6.1.3"], "fixed_in": ["6.1.4"],
                     "summary": "..."}, ...]}

A source without "covers" knows its advisories for every release (version ranges); one with
"covers" knows them only for the one release listed per project, as of that entry's date.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

FORMAT = 1
DATABASE_FILE = "advisories.json"


class AdvisoryDatabaseError(Exception):
    """The database file cannot be read as the format above."""


class MissingDatabaseError(AdvisoryDatabaseError):
    """No database file at all."""


@dataclass(frozen=True)
class CoveredRelease:
    version: str
    date: date


@dataclass(frozen=True)
class Source:
    key: str
    title: str
    date: date
    covers: Mapping[str, CoveredRelease] | None = None

    def knows(self, *, package: str, version: str) -> bool:
        """Whether this source's advisories speak about that release at all."""
        if self.covers is None:
            return True
        covered = self.covers.get(canonicalize_name(package))
        return covered is not None and Version(covered.version) == Version(version)


@dataclass(frozen=True)
class Advisory:
    source: str
    package: str
    id: str
    aliases: tuple[str, ...]
    affected: tuple[SpecifierSet, ...]
    fixed_in: tuple[str, ...]
    summary: str

    @property
    def names(self) -> frozenset[str]:
        return frozenset((self.id, *self.aliases))

    def affects(self, version: Version) -> bool:
        return any(spec.contains(version, prereleases=True) for spec in self.affected)


@dataclass(frozen=True)
class Database:
    sources: tuple[Source, ...]
    advisories: tuple[Advisory, ...]

    def for_package(self, name: str) -> list[Advisory]:
        wanted = canonicalize_name(name)
        return [a for a in self.advisories if a.package == wanted]

    def from_source(self, key: str) -> tuple[Source | None, list[Advisory]]:
        source = next((s for s in self.sources if s.key == key), None)
        return source, [a for a in self.advisories if a.source == key]


def database_path(directory: Path) -> Path:
    return directory / DATABASE_FILE


def load_database(*, directory: Path) -> Database:
    """Read the database under `directory`; MissingDatabaseError when there is none,
    AdvisoryDatabaseError naming the file and the faulty entry when it is malformed."""
    path = database_path(directory)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MissingDatabaseError(
            f"No advisory database at {path}. `make audit` fetches one from PyPI whenever the "
            "registry can be reached: run it once online, or copy that folder from a machine "
            "that has it."
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AdvisoryDatabaseError(f"{path} is not JSON: {error}") from None
    except RecursionError:
        raise AdvisoryDatabaseError(f"{path} is not the format: nested too deep") from None
    try:
        return _parse(raw)
    except (TypeError, ValueError, InvalidSpecifier) as error:
        raise AdvisoryDatabaseError(f"{path} is malformed: {error}") from None


def dump_database(*, database: Database, directory: Path) -> Path:
    """Write the database whole or not at all: a reader never sees half a file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = database_path(directory)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(_serialise(database), indent=1, sort_keys=True), encoding="utf-8")
    os.replace(partial, path)
    return path


def _parse(raw: Any) -> Database:
    _expect(raw, dict, "the file")
    if raw.get("format") != FORMAT:
        raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT}")
    sources = tuple(_parse_source(item, n) for n, item in enumerate(_list(raw, "sources", "the file")))
    known = {s.key for s in sources}
    advisories = tuple(
        advisory_from_dict(item, where=f"advisory {n}", sources=known)
        for n, item in enumerate(_list(raw, "advisories", "the file"))
    )
    return Database(sources=sources, advisories=advisories)


def _parse_source(item: Any, n: int) -> Source:
    where = f"source {n}"
    _expect(item, dict, where)
    covers = item.get("covers")
    if covers is not None:
        _expect(covers, dict, f"{where} covers")
        covers = {
            canonicalize_name(name): CoveredRelease(
                version=str(Version(_str(entry, "version", f"{where} {name}"))),
                date=date.fromisoformat(_str(entry, "date", f"{where} {name}")),
            )
            for name, entry in covers.items()
        }
    return Source(
        key=_str(item, "key", where),
        title=_str(item, "title", where),
        date=date.fromisoformat(_str(item, "date", where)),
        covers=covers,
    )


def advisory_from_dict(item: Any, *, where: str, sources: Collection[str]) -> Advisory:
    """One advisory entry of the format, checked; ValueError or TypeError saying what is wrong."""
    _expect(item, dict, where)
    where = f"{where} ({item.get('id', '?')})"
    source = _str(item, "source", where)
    if source not in sources:
        raise ValueError(f"{where}: source {source!r} is not among the sources")
    affected = _strings(item, "affected", where)
    if not affected:
        raise ValueError(f"{where}: no affected range")
    ranges = []
    for text in affected:
        try:
            ranges.append(SpecifierSet(text))
        except InvalidSpecifier:
            raise ValueError(f"{where}: affected range {text!r} is not a version range") from None
    return Advisory(
        source=source,
        package=canonicalize_name(_str(item, "package", where)),
        id=_str(item, "id", where),
        aliases=tuple(_strings(item, "aliases", where)),
        affected=tuple(ranges),
        fixed_in=tuple(_strings(item, "fixed_in", where)),
        summary=_optional_str(item, "summary", where),
    )


def _expect(value: Any, kind: type, where: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"{where} should be a {kind.__name__}, not {type(value).__name__}")


def _field(item: dict, key: str, where: str) -> Any:
    if key not in item:
        raise ValueError(f"{where}: missing field {key!r}")
    return item[key]


def _list(item: dict, key: str, where: str) -> list:
    value = _field(item, key, where)
    _expect(value, list, f"{where}: {key}")
    return value


def _str(item: dict, key: str, where: str) -> str:
    value = _field(item, key, where)
    _expect(value, str, f"{where}: {key}")
    return value


def _optional_str(item: dict, key: str, where: str) -> str:
    value = item.get(key) or ""
    _expect(value, str, f"{where}: {key}")
    return value


def _strings(item: dict, key: str, where: str) -> list[str]:
    values = _list(item, key, where)
    for value in values:
        _expect(value, str, f"{where}: {key} item")
    return values


def _serialise(database: Database) -> dict:
    return {
        "format": FORMAT,
        "sources": [_serialise_source(s) for s in database.sources],
        "advisories": [_serialise_advisory(a) for a in database.advisories],
    }


def _serialise_source(source: Source) -> dict:
    out: dict[str, Any] = {"key": source.key, "title": source.title, "date": source.date.isoformat()}
    if source.covers is not None:
        out["covers"] = {
            name: {"version": c.version, "date": c.date.isoformat()} for name, c in source.covers.items()
        }
    return out


def _serialise_advisory(advisory: Advisory) -> dict:
    return {
        "source": advisory.source,
        "package": advisory.package,
        "id": advisory.id,
        "aliases": list(advisory.aliases),
        "affected": [str(spec) for spec in advisory.affected],
        "fixed_in": list(advisory.fixed_in),
        "summary": advisory.summary,
    }


def merge_sources(*, parts: Iterable[tuple[Source, list[Advisory]]]) -> Database:
    sources, advisories = [], []
    for source, found in parts:
        sources.append(source)
        advisories.extend(found)
    return Database(sources=tuple(sources), advisories=tuple(advisories))
