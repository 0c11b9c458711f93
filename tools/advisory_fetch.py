"""Fetch the dependency audit's advisory database from the package registry (PyPI), for
`dependency_audit` to read offline. Two sources, both served by PyPI itself:

- PyPI's JSON API, one project at a time: the advisories (OSV) that PyPI lists for the
  project's latest release. Fresh, but silent about any other release, so the report says
  which pins it knows.
- safety-db, a PyPI package that ships PyUp's free advisory database with version ranges
  for every release; its last release is years old, so the report gives its date.

A source that cannot be fetched keeps its part of the cached database (a PyPI project that
cannot be fetched keeps its cached entry), so the audit still runs, and says how old its
data is. This command never fails for want of a network: the audit itself reports a missing
database.

    python -m tools.advisory_fetch [--lock FILE] [--database DIR] [--index-url URL]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import threading
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tools.advisory_db import (
    Advisory,
    AdvisoryDatabaseError,
    CoveredRelease,
    Database,
    MissingDatabaseError,
    Source,
    advisory_from_dict,
    dump_database,
    load_database,
    merge_sources,
)
from tools.dependency_audit import DEFAULT_DATABASE, DEFAULT_LOCK, AuditInputError, Pin, read_lock

PYPI = "https://pypi.org"
PYPI_TITLE = "PyPI JSON API (advisories on each project's latest release)"
SAFETY_DB = "safety-db"
TIMEOUT = httpx.Timeout(30.0, connect=10.0)


class FetchError(Exception):
    """One source could not be fetched; the message says why."""


Part = tuple[Source, list[Advisory]]


def fetch_advisories(*, lock: Path, directory: Path, index_url: str = PYPI, today: date) -> list[str]:
    """Refresh the database under `directory` from the registry at `index_url`; return what
    happened, one line each."""
    pins = read_lock(path=lock)
    cached, notes = _cached(directory)
    with httpx.Client(timeout=TIMEOUT, follow_redirects=True) as client:
        pypi, lines = _pypi_part(client, index_url, pins, cached, today)
        notes += lines
        safety, line = _safety_db_part(client, index_url, cached)
        notes.append(line)
    parts = [part for part in (pypi, safety) if part is not None]
    if not parts:
        return notes + ["Nothing fetched and nothing cached: there is no advisory database."]
    path = dump_database(database=merge_sources(parts=parts), directory=directory)
    return notes + [f"Advisory database written to {path}."]


def _cached(directory: Path) -> tuple[Database | None, list[str]]:
    try:
        return load_database(directory=directory), []
    except MissingDatabaseError:
        return None, ["No cached database yet."]
    except AdvisoryDatabaseError as error:
        return None, [f"The cached database cannot be used ({error}); it will be replaced."]


def _cached_part(cached: Database | None, key: str) -> Part | None:
    if cached is None:
        return None
    source, advisories = cached.from_source(key)
    return (source, advisories) if source else None


def _safety_db_part(client: httpx.Client, index_url: str, cached: Database | None) -> tuple[Part | None, str]:
    try:
        (source, advisories), skipped = fetch_safety_db(client=client, index_url=index_url)
    except FetchError as error:
        part = _cached_part(cached, SAFETY_DB)
        if part is None:
            return None, f"safety-db could not be fetched ({error}); no cached copy, so it is left out."
        return part, f"safety-db could not be fetched ({error}); using the cached copy of {part[0].date}."
    left_out = f" (left out, their ranges not PEP 440: {skipped})" if skipped else ""
    return (source, advisories), f"{source.title}: fetched, data of {source.date.isoformat()}{left_out}."


def _pypi_part(
    client: httpx.Client, index_url: str, pins: list[Pin], cached: Database | None, today: date
) -> tuple[Part | None, list[str]]:
    fetched, failures = fetch_pypi_latest(client=client, index_url=index_url, pins=pins, today=today)
    old_source, old_advisories = _cached_part(cached, "pypi") or (None, [])
    old_covers = dict(old_source.covers or {}) if old_source else {}
    covers, advisories, kept, lost = {}, [], [], []
    for pin in pins:
        if pin.key in fetched:
            release, found = fetched[pin.key]
            if release:
                covers[pin.key] = release
            advisories += found
        elif pin.key in old_covers:
            covers[pin.key] = old_covers[pin.key]
            advisories += [a for a in old_advisories if a.package == pin.key]
            kept.append(old_covers[pin.key].date)
        else:
            lost.append(pin.name)
    notes = [f"PyPI JSON API: {sum(1 for r, _ in fetched.values() if r)} projects fetched."]
    if failures:
        notes.append(f"PyPI JSON API: {len(failures)} projects could not be fetched ({failures[0]}).")
    if kept:
        notes.append(f"PyPI JSON API: cached entries kept for {len(kept)} of them (oldest {min(kept)}).")
    if lost:
        named = ", ".join(lost[:10]) + (f" and {len(lost) - 10} more" if len(lost) > 10 else "")
        notes.append(f"PyPI JSON API: no entry at all for: {named}.")
    not_found = [p.name for p in pins if p.key in fetched and fetched[p.key][0] is None]
    if not_found:
        notes.append(f"PyPI JSON API: not on the registry: {', '.join(not_found)}.")
    if not covers:
        return None, notes
    oldest = min(c.date for c in covers.values())
    return (Source(key="pypi", title=PYPI_TITLE, date=oldest, covers=covers), advisories), notes


def fetch_pypi_latest(
    *, client: httpx.Client, index_url: str, pins: Sequence[Pin], today: date
) -> tuple[dict[str, tuple[CoveredRelease | None, list[Advisory]]], list[str]]:
    """For each pin's project: its latest release and the advisories PyPI lists for it
    (release None: no such project). Also the failures; after the first failure to reach
    the registry at all, the rest are not tried, since each would wait out its own timeout."""
    unreachable = threading.Event()
    fetched: dict[str, tuple[CoveredRelease | None, list[Advisory]]] = {}
    failures: list[str] = []

    def one(pin: Pin) -> None:
        if unreachable.is_set():
            failures.append(f"{pin.name}: skipped, the registry is unreachable")
            return
        try:
            fetched[pin.key] = _pypi_project(client, index_url, pin, today)
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:
            unreachable.set()
            failures.append(f"{pin.name}: {type(error).__name__}: {error}")
        except httpx.HTTPError as error:
            failures.append(f"{pin.name}: {type(error).__name__}: {error}")
        except FetchError as error:
            failures.append(f"{pin.name}: {error}")

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, pins))
    return fetched, failures


def _pypi_project(
    client: httpx.Client, index_url: str, pin: Pin, today: date
) -> tuple[CoveredRelease | None, list[Advisory]]:
    response = client.get(f"{index_url}/pypi/{pin.key}/json")
    if response.status_code == 404:
        return None, []
    if response.status_code != 200:
        raise FetchError(f"HTTP {response.status_code}")
    try:
        project = response.json()
        latest = project["info"]["version"]
        if not isinstance(latest, str):
            raise TypeError("info.version is not a string")
        Version(latest)
        found = [_pypi_advisory(pin.key, latest, v) for v in project.get("vulnerabilities") or []]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise FetchError(f"unexpected answer ({type(error).__name__}: {error})") from None
    return CoveredRelease(version=latest, date=today), [a for a in found if a is not None]


def _pypi_advisory(package: str, latest: str, vulnerability: Any) -> Advisory | None:
    """One of the vulnerabilities PyPI lists for the latest release: affects that release."""
    if not isinstance(vulnerability, dict):
        raise TypeError("a vulnerability is not an object")
    if vulnerability.get("withdrawn"):
        return None
    entry = {
        "source": "pypi",
        "package": package,
        "id": vulnerability.get("id"),
        "aliases": vulnerability.get("aliases") or [],
        "affected": [f"=={latest}"],
        "fixed_in": vulnerability.get("fixed_in") or [],
        "summary": vulnerability.get("summary") or vulnerability.get("details") or "",
    }
    return advisory_from_dict(entry, where=f"{package} vulnerability", sources={"pypi"})


def fetch_safety_db(*, client: httpx.Client, index_url: str) -> tuple[Part, int]:
    """safety-db's newest wheel from the registry, its sha256 checked, read into our format."""
    try:
        release = client.get(f"{index_url}/pypi/{SAFETY_DB}/json")
        release.raise_for_status()
        meta = release.json()
        wheel = next(u for u in meta["urls"] if u["packagetype"] == "bdist_wheel")
        name, digest, version = wheel["filename"], wheel["digests"]["sha256"], str(meta["info"]["version"])
        body = client.get(wheel["url"])
        body.raise_for_status()
    except (httpx.HTTPError, ValueError, KeyError, TypeError, StopIteration, RecursionError) as error:
        raise FetchError(f"{type(error).__name__}: {error}") from None
    if hashlib.sha256(body.content).hexdigest() != digest:
        raise FetchError(f"{name} does not match its sha256 digest")
    try:
        with zipfile.ZipFile(io.BytesIO(body.content)) as archive:
            data = json.loads(archive.read("safety_db/insecure_full.json"))
    except (zipfile.BadZipFile, KeyError, ValueError, RecursionError) as error:
        raise FetchError(f"{name}: unexpected content ({error})") from None
    return read_safety_db(data=data, version=version)


def read_safety_db(*, data: Any, version: str) -> tuple[Part, int]:
    """safety-db's insecure_full.json as one source, and how many entries were left out:
    each entry's `specs` are its affected ranges and their `<X` bounds the fixed releases;
    an entry the audit could not match (ranges that are not PEP 440) is left out."""
    if not isinstance(data, dict):
        raise FetchError("insecure_full.json is not an object")
    try:
        stamp = datetime.fromtimestamp(data["$meta"]["timestamp"], tz=UTC).date()
    except (KeyError, TypeError, ValueError, OverflowError, OSError) as error:
        raise FetchError(f"no usable $meta.timestamp ({type(error).__name__}: {error})") from None
    advisories, skipped = [], 0
    for name, entries in data.items():
        if name == "$meta":
            continue
        for entry in entries if isinstance(entries, list) else [None]:
            try:
                advisories.append(_safety_advisory(name, entry))
            except (ValueError, TypeError):
                skipped += 1
    title = f"safety-db {version} (PyUp's free advisory database, a PyPI package)"
    return (Source(key=SAFETY_DB, title=title, date=stamp), advisories), skipped


def _safety_advisory(name: str, entry: Any) -> Advisory:
    if not isinstance(entry, dict):
        raise TypeError("an entry is not an object")
    cve = entry.get("cve")
    advisory = advisory_from_dict(
        {
            "source": SAFETY_DB,
            "package": name,
            "id": entry.get("id"),
            "aliases": re.findall(r"CVE-\d+-\d+", cve if isinstance(cve, str) else ""),
            "affected": entry.get("specs"),
            "fixed_in": [],
            "summary": entry.get("advisory") or "",
        },
        where=f"safety-db {name}",
        sources={SAFETY_DB},
    )
    return replace(advisory, fixed_in=_upper_bounds(advisory.affected))


def _upper_bounds(ranges: tuple[SpecifierSet, ...]) -> tuple[str, ...]:
    bounds = {s.version for spec in ranges for s in spec if s.operator == "<"}
    return tuple(sorted(bounds, key=Version))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.advisory_fetch", description=__doc__)
    parser.add_argument("--lock", type=Path, default=DEFAULT_LOCK)
    parser.add_argument("--database", type=Path, default=DEFAULT_DATABASE)
    parser.add_argument("--index-url", default=PYPI)
    args = parser.parse_args(argv)
    try:
        notes = fetch_advisories(
            lock=args.lock, directory=args.database, index_url=args.index_url.rstrip("/"), today=date.today()
        )
    except (AuditInputError, OSError) as error:
        print(f"advisory fetch: {error}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"advisory fetch: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
