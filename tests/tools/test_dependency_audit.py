"""The dependency audit checks every pin of the lock file against the cached advisory
database, offline; a finding fails it unless the accepted list gives a reason. Each test
writes its own small database in the real format."""

from __future__ import annotations

import ast
import json
from datetime import date
from pathlib import Path

import pytest

from tools.advisory_db import AdvisoryDatabaseError, MissingDatabaseError, load_database
from tools.dependency_audit import (
    AuditInputError,
    find_vulnerabilities,
    main,
    read_accepted,
    read_lock,
    render_report,
    run_audit,
)

ROOT = Path(__file__).resolve().parents[2]
RANGES_SOURCE = {"key": "ranges", "title": "Range database 1.0", "date": "2021-07-01"}
LATEST_SOURCE = {
    "key": "latest",
    "title": "Latest-release advisories",
    "date": "2026-12-01",
    "covers": {
        "django": {"version": "5.2.19", "date": "2026-12-01"},
        "requests": {"version": "3.0.0", "date": "2026-12-01"},
    },
}


def advisory(id, package, affected, *, source="ranges", aliases=(), fixed_in=(), summary=""):
    return {
        "source": source,
        "package": package,
        "id": id,
        "aliases": list(aliases),
        "affected": list(affected),
        "fixed_in": list(fixed_in),
        "summary": summary,
    }


def without(entry: dict, key: str) -> dict:
    return {k: v for k, v in entry.items() if k != key}


def database_text(*advisories) -> str:
    return json.dumps({"format": 1, "sources": [RANGES_SOURCE], "advisories": list(advisories)})


def write_database(directory: Path, *advisories, sources=(RANGES_SOURCE,)) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = {"format": 1, "sources": list(sources), "advisories": list(advisories)}
    (directory / "advisories.json").write_text(json.dumps(body), encoding="utf-8")
    return directory


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def audit_of(tmp_path, lock_text, *advisories, accepted="", sources=(RANGES_SOURCE,)):
    lock = write(tmp_path / "requirements.lock", lock_text)
    database = write_database(tmp_path / "advisories", *advisories, sources=sources)
    return run_audit(lock=lock, database_dir=database, accepted=write(tmp_path / "accepted.txt", accepted))


def found(audit):
    return [(f.pin.name, f.pin.version, f.advisories[0].id) for f in audit.findings]


def test_a_pin_inside_an_affected_range_is_a_finding(tmp_path):
    audit = audit_of(
        tmp_path,
        "Django==1.1\nrequests==2.31.0\n",
        advisory("PYUP-1", "django", ["<1.0.4", ">=1.1,<1.1.1"], fixed_in=["1.0.4", "1.1.1"]),
    )
    assert found(audit) == [("Django", "1.1", "PYUP-1")]
    assert audit.findings[0].fixed_in == ["1.0.4", "1.1.1"]


@pytest.mark.parametrize(
    "version, affected",
    [
        ("1.0.3", True),
        ("1.0.4", False),  # the fix itself
        ("1.0.10", False),  # ordered as versions, not as text
        ("1.1", True),
        ("1.1.0.post1", True),
        ("1.0.3rc1", True),  # pre-releases are checked too
        ("1.1.1rc1", False),  # but PEP 440's "<1.1.1" leaves out 1.1.1's own pre-releases
        ("1.1.1", False),
        ("2.0", False),
    ],
)
def test_ranges_are_read_as_pep_440_versions(tmp_path, version, affected):
    audit = audit_of(
        tmp_path, f"django=={version}\n", advisory("PYUP-1", "django", ["<1.0.4", ">=1.1,<1.1.1"])
    )
    assert bool(audit.findings) is affected


def test_package_names_match_however_the_lock_spells_them(tmp_path):
    audit = audit_of(
        tmp_path,
        "PyYAML==5.3\ntyping_extensions==4.0.0\n",
        advisory("A-1", "pyyaml", ["<5.4"]),
        advisory("A-2", "Typing.Extensions", ["<4.1"]),
    )
    assert found(audit) == [("PyYAML", "5.3", "A-1"), ("typing_extensions", "4.0.0", "A-2")]


def test_one_vulnerability_named_by_two_sources_is_one_finding(tmp_path):
    audit = audit_of(
        tmp_path,
        "django==5.2.19\n",
        advisory("PYUP-9", "django", ["<5.2.20"], aliases=["CVE-2026-1"], fixed_in=["5.2.20"]),
        advisory(
            "PYSEC-2026-7",
            "django",
            ["==5.2.19"],
            source="latest",
            aliases=["CVE-2026-1", "GHSA-aaaa"],
            fixed_in=["5.2.20", "6.1.4"],
        ),
        advisory("GHSA-aaaa", "django", ["==5.2.19"], source="latest", aliases=["PYSEC-2026-7"]),
        sources=(RANGES_SOURCE, LATEST_SOURCE),
    )
    [finding] = audit.findings
    assert finding.names == {"PYUP-9", "PYSEC-2026-7", "GHSA-aaaa", "CVE-2026-1"}
    assert finding.fixed_in == ["5.2.20", "6.1.4"]


def test_the_report_gives_each_finding_its_id_fixes_and_summary(tmp_path):
    audit = audit_of(
        tmp_path,
        "django==1.1\n",
        advisory(
            "PYUP-1", "django", ["<1.1.1"], aliases=["CVE-2009-3695"], fixed_in=["1.1.1"], summary="ReDoS."
        ),
    )
    report = render_report(audit=audit, lock_name="requirements.lock", today=date(2026, 12, 4))
    assert "- django 1.1: PYUP-1 (also CVE-2009-3695); fixed in: 1.1.1; from: ranges" in report
    assert "    ReDoS." in report
    assert "NOT ACCEPTED" in report


def test_the_report_names_each_source_its_date_and_the_pins_a_source_cannot_speak_for(tmp_path):
    audit = audit_of(
        tmp_path,
        "Django==5.2.18\nrequests==3.0.0\nmissing-one==1.0\n",
        sources=(LATEST_SOURCE, RANGES_SOURCE),
    )
    report = render_report(audit=audit, lock_name="requirements.lock", today=date(2026, 12, 4))
    assert "Dependency audit of requirements.lock: 3 pinned packages." in report
    assert "- Latest-release advisories: as of 2026-12-01 (3 days old)" in report
    assert "knows the pinned release of 1 of 3 packages" in report
    assert "Django 5.2.18 (latest 5.2.19), missing-one 1.0 (not on the registry)" in report
    assert "- Range database 1.0: as of 2021-07-01 (1982 days old)" in report
    assert report.endswith("Findings: none.")


def test_a_clean_lock_passes(tmp_path, capsys):
    lock = write(tmp_path / "requirements.lock", "django==5.2.19\n")
    database = write_database(tmp_path / "db", advisory("PYUP-1", "django", ["<1.1.1"]))
    assert main(["--lock", str(lock), "--database", str(database), "--accepted", str(tmp_path / "none")]) == 0
    assert "Findings: none." in capsys.readouterr().out


def test_an_unaccepted_finding_fails_the_audit(tmp_path, capsys):
    lock = write(tmp_path / "requirements.lock", "django==1.1\n")
    database = write_database(tmp_path / "db", advisory("PYUP-1", "django", ["<1.1.1"]))
    accepted = write(tmp_path / "accepted.txt", "# package advisory-id reason\n")
    assert main(["--lock", str(lock), "--database", str(database), "--accepted", str(accepted)]) == 1
    assert "1 finding(s) not accepted in accepted.txt." in capsys.readouterr().err


def test_a_finding_accepted_with_a_reason_passes_and_the_report_gives_the_reason(tmp_path, capsys):
    lock = write(tmp_path / "requirements.lock", "django==1.1\n")
    database = write_database(
        tmp_path / "db", advisory("PYUP-1", "django", ["<1.1.1"], aliases=["CVE-2009-3695"])
    )
    # Accepted by an alias, the name a maintainer is likeliest to know it by.
    accepted = write(
        tmp_path / "accepted.txt", "Django CVE-2009-3695 only in EmailField, which we never use\n"
    )
    assert main(["--lock", str(lock), "--database", str(database), "--accepted", str(accepted)]) == 0
    out = capsys.readouterr().out
    assert "Findings: 1 (1 accepted)." in out
    assert "accepted (line 1): only in EmailField, which we never use" in out


def test_an_acceptance_is_for_its_package_only(tmp_path):
    audit = audit_of(
        tmp_path,
        "django==1.1\n",
        advisory("PYUP-1", "django", ["<1.1.1"]),
        accepted="flask PYUP-1 another package's finding\n",
    )
    assert [f.pin.name for f in audit.failing] == ["django"]


def test_an_acceptance_that_matches_nothing_any_more_is_reported(tmp_path):
    audit = audit_of(tmp_path, "django==5.2.19\n", accepted="django PYUP-1 was fixed upstream\n")
    report = render_report(audit=audit, lock_name="requirements.lock", today=date(2026, 12, 4))
    assert "Accepted but no longer found (line 1): django PYUP-1" in report


def test_an_acceptance_without_a_reason_is_refused(tmp_path):
    with pytest.raises(AuditInputError, match=r"accepted.txt line 2: expected 'package advisory-id reason'"):
        read_accepted(path=write(tmp_path / "accepted.txt", "# header\ndjango PYUP-1\n"))


def test_without_a_database_the_audit_says_how_to_get_one(tmp_path, capsys):
    lock = write(tmp_path / "requirements.lock", "django==5.2.19\n")
    assert main(["--lock", str(lock), "--database", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert f"No advisory database at {tmp_path / 'nowhere' / 'advisories.json'}" in err
    assert "`make audit` fetches one from PyPI" in err
    with pytest.raises(MissingDatabaseError):
        load_database(directory=tmp_path / "nowhere")


@pytest.mark.parametrize(
    "body, message",
    [
        ("{not json", "is not JSON"),
        ('{"format": 2, "sources": [], "advisories": []}', "format 2, expected 1"),
        ('{"format": 1, "advisories": []}', "the file: missing field 'sources'"),
        ('{"format": 1, "sources": {}, "advisories": []}', "sources should be a list"),
        (
            '{"format": 1, "sources": [{"key": "s", "title": "t", "date": "yesterday"}], "advisories": []}',
            "Invalid isoformat string",
        ),
        (
            database_text(advisory("X-1", "django", ["<<1"])),
            "advisory 0 (X-1): affected range '<<1' is not a version range",
        ),
        (database_text(advisory("X-1", "django", [])), "advisory 0 (X-1): no affected range"),
        (
            database_text(advisory("X-1", "django", ["<1"], source="x")),
            "advisory 0 (X-1): source 'x' is not among the sources",
        ),
        (
            database_text(without(advisory("X-1", "django", ["<1"]), "package")),
            "advisory 0 (X-1): missing field 'package'",
        ),
        (
            database_text(advisory("X-1", "django", ["<1"], fixed_in=[1.1])),
            "advisory 0 (X-1): fixed_in item should be a str, not float",
        ),
    ],
)
def test_a_malformed_database_is_an_error_that_names_the_fault(tmp_path, capsys, body, message):
    (tmp_path / "db").mkdir()
    write(tmp_path / "db" / "advisories.json", body)
    with pytest.raises(AdvisoryDatabaseError, match="advisories.json") as error:
        load_database(directory=tmp_path / "db")
    assert message in str(error.value)
    lock = write(tmp_path / "requirements.lock", "django==5.2.19\n")
    assert main(["--lock", str(lock), "--database", str(tmp_path / "db")]) == 2
    assert message in capsys.readouterr().err


def test_the_lock_file_may_hold_comments_blank_lines_and_markers(tmp_path):
    lock = write(
        tmp_path / "requirements.lock",
        "# pinned\n\ncelery[redis]==5.7.0\ntzdata==2026.6 ; sys_platform == 'win32'  # windows\n",
    )
    assert [(p.name, p.version, p.line) for p in read_lock(path=lock)] == [
        ("celery", "5.7.0", 3),
        ("tzdata", "2026.6", 4),
    ]


@pytest.mark.parametrize(
    "line, message",
    [
        ("django>=5.2", "does not pin one exact version"),
        ("django==5.*", "does not pin one exact version"),
        ("django", "does not pin one exact version"),
        ("-e .", "is not a requirement"),
    ],
)
def test_a_lock_line_that_pins_no_version_is_an_error_naming_its_line(tmp_path, line, message):
    lock = write(tmp_path / "requirements.lock", f"celery==5.7.0\n{line}\n")
    with pytest.raises(AuditInputError, match=f"requirements.lock line 2: .*{message}"):
        read_lock(path=lock)


def test_the_real_lock_file_reads(tmp_path):
    pins = read_lock(path=ROOT / "requirements.lock")
    assert pins and all(p.version for p in pins)
    assert find_vulnerabilities(pins=pins, database=load_database(directory=write_database(tmp_path))) == []


def test_no_console_package_imports_the_tools():
    for package in ("core", "ops_console", "fleet", "diagnostics", "incidents"):
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
            modules += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            assert not [m for m in modules if m.split(".")[0] == "tools"], path
