"""The dependency audit: every pin of requirements.lock against the cached advisory database
(tools/advisory_db.py), offline. A finding fails the audit unless tools/audit-accepted.txt
accepts it with a reason.

    python -m tools.dependency_audit [--lock FILE] [--database DIR] [--accepted FILE]

Exit status: 0 no unaccepted finding, 1 unaccepted findings, 2 the lock file, the database or
the accepted list cannot be read.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from tools.advisory_db import Advisory, AdvisoryDatabaseError, Database, Source, load_database

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LOCK = ROOT / "requirements.lock"
DEFAULT_DATABASE = ROOT / "var" / "advisories"
DEFAULT_ACCEPTED = ROOT / "tools" / "audit-accepted.txt"


class AuditInputError(Exception):
    """The lock file or the accepted list cannot be read; the message names the line."""


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    line: int

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)


@dataclass(frozen=True)
class Acceptance:
    package: str
    advisory_id: str
    reason: str
    line: int

    def covers(self, finding: Finding) -> bool:
        return self.package == finding.pin.key and self.advisory_id in finding.names


@dataclass(frozen=True)
class Finding:
    pin: Pin
    advisories: tuple[Advisory, ...]  # one advisory as each source that has it names it

    @property
    def names(self) -> frozenset[str]:
        return frozenset().union(*(a.names for a in self.advisories))

    @property
    def fixed_in(self) -> list[str]:
        versions = {v for a in self.advisories for v in a.fixed_in}
        return sorted(versions, key=_version_order)


def read_lock(*, path: Path) -> list[Pin]:
    """The pins of a lock file: `name==version` lines; blank lines, comments and environment
    markers allowed; anything else is an error naming its line."""
    pins = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = raw.split("#", 1)[0].strip()
        if text:
            pins.append(_pin(text, number, path))
    return pins


def _pin(text: str, number: int, path: Path) -> Pin:
    where = f"{path.name} line {number}"
    try:
        requirement = Requirement(text)
    except InvalidRequirement as error:
        raise AuditInputError(f"{where}: {text!r} is not a requirement ({error})") from None
    specs = list(requirement.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
        raise AuditInputError(f"{where}: {text!r} does not pin one exact version (name==version)")
    try:
        Version(specs[0].version)
    except InvalidVersion:
        raise AuditInputError(f"{where}: {specs[0].version!r} is not a version") from None
    return Pin(name=requirement.name, version=specs[0].version, line=number)


def read_accepted(*, path: Path) -> list[Acceptance]:
    """Accepted findings, one a line: `package advisory-id reason`; the reason is required."""
    if not path.exists():
        return []
    accepted = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.split(maxsplit=2)
        if len(fields) < 3:
            raise AuditInputError(
                f"{path.name} line {number}: expected 'package advisory-id reason', got {text!r}"
            )
        accepted.append(
            Acceptance(
                package=canonicalize_name(fields[0]), advisory_id=fields[1], reason=fields[2], line=number
            )
        )
    return accepted


def find_vulnerabilities(*, pins: Sequence[Pin], database: Database) -> list[Finding]:
    """Each pin's advisories whose affected ranges hold the pinned version; advisories that
    share an id or alias (one vulnerability as two sources name it) make one finding."""
    findings = []
    for pin in pins:
        version = Version(pin.version)
        matched = [a for a in database.for_package(pin.key) if a.affects(version)]
        findings.extend(Finding(pin=pin, advisories=group) for group in _same_vulnerability(matched))
    return findings


def _same_vulnerability(advisories: list[Advisory]) -> list[tuple[Advisory, ...]]:
    groups: list[tuple[set[str], list[Advisory]]] = []
    for advisory in advisories:
        joined = [g for g in groups if g[0] & advisory.names]
        names, members = set(advisory.names), [advisory]
        for group in joined:
            names |= group[0]
            members = group[1] + members
            groups.remove(group)
        groups.append((names, members))
    return [tuple(members) for _, members in groups]


def _version_order(text: str) -> tuple[int, Version | str]:
    try:
        return (0, Version(text))
    except InvalidVersion:
        return (1, text)


@dataclass(frozen=True)
class Audit:
    pins: list[Pin]
    database: Database
    findings: list[Finding]
    accepted: list[Acceptance]

    def acceptance(self, finding: Finding) -> Acceptance | None:
        return next((a for a in self.accepted if a.covers(finding)), None)

    @property
    def failing(self) -> list[Finding]:
        return [f for f in self.findings if self.acceptance(f) is None]

    @property
    def unused_acceptances(self) -> list[Acceptance]:
        return [a for a in self.accepted if not any(a.covers(f) for f in self.findings)]


def run_audit(*, lock: Path, database_dir: Path, accepted: Path) -> Audit:
    pins = read_lock(path=lock)
    database = load_database(directory=database_dir)
    return Audit(
        pins=pins,
        database=database,
        findings=find_vulnerabilities(pins=pins, database=database),
        accepted=read_accepted(path=accepted),
    )


def render_report(*, audit: Audit, lock_name: str, today: date) -> str:
    lines = [f"Dependency audit of {lock_name}: {len(audit.pins)} pinned packages."]
    lines += ["Advisory database:"] + [f"  {line}" for line in _source_lines(audit, today)]
    if not audit.findings:
        lines.append("Findings: none.")
    else:
        accepted = len(audit.findings) - len(audit.failing)
        lines.append(f"Findings: {len(audit.findings)} ({accepted} accepted).")
        for finding in audit.findings:
            lines += _finding_lines(finding, audit.acceptance(finding))
    for acceptance in audit.unused_acceptances:
        lines.append(
            f"Accepted but no longer found (line {acceptance.line}): "
            f"{acceptance.package} {acceptance.advisory_id}"
        )
    return "\n".join(lines)


def _source_lines(audit: Audit, today: date) -> list[str]:
    lines = []
    for source in audit.database.sources:
        age = (today - source.date).days
        lines.append(f"- {source.title}: as of {source.date.isoformat()} ({age} days old)")
        if source.covers is not None:
            unknown = [p for p in audit.pins if not source.knows(package=p.name, version=p.version)]
            known = len(audit.pins) - len(unknown)
            lines.append(f"  knows the pinned release of {known} of {len(audit.pins)} packages")
            if unknown:
                text = "but not of: " + ", ".join(_unknown(p, source) for p in unknown)
                lines += textwrap.wrap(text, width=96, initial_indent="  ", subsequent_indent="    ")
    return lines


def _unknown(pin: Pin, source: Source) -> str:
    covered = (source.covers or {}).get(pin.key)
    if covered is None:
        return f"{pin.name} {pin.version} (not on the registry)"
    return f"{pin.name} {pin.version} (latest {covered.version})"


def _finding_lines(finding: Finding, acceptance: Acceptance | None) -> list[str]:
    first = finding.advisories[0]
    also = sorted(finding.names - {first.id})
    fixed = ", ".join(finding.fixed_in) or "no fixed release known"
    lines = [
        f"- {finding.pin.name} {finding.pin.version}: {first.id}"
        + (f" (also {', '.join(also)})" if also else "")
        + f"; fixed in: {fixed}; from: {', '.join(sorted({a.source for a in finding.advisories}))}"
    ]
    summary = next((a.summary for a in finding.advisories if a.summary), "")
    if summary:
        lines += textwrap.wrap(summary, width=100, initial_indent="    ", subsequent_indent="    ")[:4]
    if acceptance is None:
        lines.append("    NOT ACCEPTED")
    else:
        lines.append(f"    accepted (line {acceptance.line}): {acceptance.reason}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.dependency_audit", description=__doc__)
    parser.add_argument("--lock", type=Path, default=DEFAULT_LOCK)
    parser.add_argument("--database", type=Path, default=DEFAULT_DATABASE)
    parser.add_argument("--accepted", type=Path, default=DEFAULT_ACCEPTED)
    args = parser.parse_args(argv)
    try:
        audit = run_audit(lock=args.lock, database_dir=args.database, accepted=args.accepted)
    except (AuditInputError, AdvisoryDatabaseError, OSError) as error:
        print(f"dependency audit: {error}", file=sys.stderr)
        return 2
    print(render_report(audit=audit, lock_name=args.lock.name, today=date.today()))
    if audit.failing:
        print(f"{len(audit.failing)} finding(s) not accepted in {args.accepted.name}.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
