"""`make audit` first fetches the advisory database from the package registry, then audits
offline. Here the registry is a real HTTP server on the loopback that answers as PyPI does
(its JSON API and a safety-db wheel the test builds); a source that cannot be fetched keeps
its cached part, dated."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import threading
import zipfile
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tools import advisory_fetch, dependency_audit
from tools.advisory_db import load_database
from tools.advisory_fetch import fetch_advisories

LOCK = "Django==5.2.19\nrequests==2.19.0\nin-house-lib==1.0\n"
NOVEMBER, DECEMBER = date(2026, 11, 1), date(2026, 12, 4)
SAFETY_DB = {
    "$meta": {"advisory": "PyUp.io metadata", "timestamp": 1625119202},  # 2021-07-01
    "requests": [
        {
            "advisory": "Requests before 2.20.0 sends the Authorization header to an HTTP redirect target.",
            "cve": "CVE-2018-18074",
            "id": "pyup.io-36546",
            "specs": ["<2.20.0"],
            "v": "<2.20.0",
        }
    ],
    "cumin": [
        {"advisory": "Not PEP 440.", "cve": None, "id": "pyup.io-1", "specs": ["<r5238"], "v": "<r5238"}
    ],
}


def vulnerability(id, aliases, *, fixed_in=(), withdrawn=None):
    return {
        "id": id,
        "aliases": aliases,
        "details": "SQL injection in QuerySet.order_by().",
        "summary": None,
        "fixed_in": list(fixed_in),
        "link": f"https://osv.dev/vulnerability/{id}",
        "source": "osv",
        "withdrawn": withdrawn,
    }


def wheel(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, body in files.items():
            archive.writestr(name, body)
    return buffer.getvalue()


class Registry:
    """PyPI's answers, by path; a test changes them between fetches."""

    def __init__(self):
        self.routes: dict[str, tuple[int, bytes]] = {}
        handler = type("Handler", (_Handler,), {"registry": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def json(self, path: str, body: dict, status: int = 200) -> None:
        self.routes[path] = (status, json.dumps(body).encode())

    def publish_safety_db(self, *, tamper: bool = False) -> None:
        body = wheel({"safety_db/insecure_full.json": json.dumps(SAFETY_DB).encode()})
        digest = hashlib.sha256(body).hexdigest()
        name = "safety_db-2021.7.17-py2.py3-none-any.whl"
        self.routes[f"/files/{name}"] = (200, body + (b"tampered" if tamper else b""))
        wheel_file = {
            "packagetype": "bdist_wheel",
            "filename": name,
            "url": f"{self.url}/files/{name}",
            "digests": {"sha256": digest},
        }
        sdist = {"packagetype": "sdist", "filename": "safety-db-2021.7.17.tar.gz", "url": "", "digests": {}}
        self.json("/pypi/safety-db/json", {"info": {"version": "2021.7.17"}, "urls": [sdist, wheel_file]})

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    registry: Registry

    def do_GET(self):  # noqa: N802 (the standard library's name)
        status, body = self.registry.routes.get(self.path, (404, b"Not Found"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def registry():
    registry = Registry()
    registry.json(
        "/pypi/django/json",
        {
            "info": {"version": "5.2.19"},
            "vulnerabilities": [
                vulnerability("PYSEC-2026-1", ["CVE-2026-1001", "GHSA-xxxx"], fixed_in=["5.2.20", "6.1.4"]),
                vulnerability("GHSA-xxxx", ["CVE-2026-1001", "PYSEC-2026-1"], fixed_in=["5.2.20", "6.1.4"]),
                vulnerability("PYSEC-2025-9", [], withdrawn="2026-01-01T00:00:00Z"),
            ],
        },
    )
    registry.json("/pypi/requests/json", {"info": {"version": "3.0.0"}, "vulnerabilities": []})
    registry.publish_safety_db()
    registry.thread.start()
    yield registry
    registry.stop()


@pytest.fixture
def lock(tmp_path) -> Path:
    path = tmp_path / "requirements.lock"
    path.write_text(LOCK, encoding="utf-8")
    return path


def unreachable_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def audit_report(lock: Path, database: Path, today: date) -> str:
    audit = dependency_audit.run_audit(lock=lock, database_dir=database, accepted=lock.with_name("none"))
    return dependency_audit.render_report(audit=audit, lock_name=lock.name, today=today)


def test_it_fetches_both_sources_and_the_audit_then_runs_offline(registry, lock, tmp_path):
    database = tmp_path / "advisories"
    notes = fetch_advisories(lock=lock, directory=database, index_url=registry.url, today=DECEMBER)
    assert "PyPI JSON API: 2 projects fetched." in notes
    assert "PyPI JSON API: not on the registry: in-house-lib." in notes
    assert (
        "safety-db 2021.7.17 (PyUp's free advisory database, a PyPI package): fetched, data of 2021-07-01 "
        "(left out, their ranges not PEP 440: 1)." in notes
    )
    registry.stop()

    report = audit_report(lock, database, DECEMBER)
    assert "- PyPI JSON API (advisories on each project's latest release): as of 2026-12-04" in report
    assert "knows the pinned release of 1 of 3 packages" in report
    assert "requests 2.19.0 (latest 3.0.0), in-house-lib 1.0 (not on the registry)" in report
    assert "safety-db 2021.7.17 (PyUp's free advisory database, a PyPI package): as of 2021-07-01" in report
    assert "Findings: 2 (0 accepted)." in report
    assert (
        "- Django 5.2.19: PYSEC-2026-1 (also CVE-2026-1001, GHSA-xxxx); fixed in: 5.2.20, 6.1.4; from: pypi"
        in report
    )
    assert "    SQL injection in QuerySet.order_by()." in report
    assert (
        "- requests 2.19.0: pyup.io-36546 (also CVE-2018-18074); fixed in: 2.20.0; from: safety-db" in report
    )
    assert "PYSEC-2025-9" not in report  # withdrawn


def test_safety_db_entries_whose_ranges_are_not_pep_440_are_left_out(registry, lock, tmp_path):
    fetch_advisories(lock=lock, directory=tmp_path, index_url=registry.url, today=DECEMBER)
    assert [a.id for a in load_database(directory=tmp_path).advisories if a.source == "safety-db"] == [
        "pyup.io-36546"
    ]


def test_when_the_registry_cannot_be_reached_the_cached_copy_stays_and_says_its_date(
    registry, lock, tmp_path
):
    fetch_advisories(lock=lock, directory=tmp_path, index_url=registry.url, today=NOVEMBER)
    registry.stop()

    notes = fetch_advisories(lock=lock, directory=tmp_path, index_url=registry.url, today=DECEMBER)
    assert "PyPI JSON API: 0 projects fetched." in notes
    assert "PyPI JSON API: cached entries kept for 2 of them (oldest 2026-11-01)." in notes
    assert any("safety-db could not be fetched (ConnectError" in n for n in notes)
    assert any(n.endswith("using the cached copy of 2021-07-01.") for n in notes)
    report = audit_report(lock, tmp_path, DECEMBER)
    assert "latest release): as of 2026-11-01 (33 days old)" in report
    assert "Findings: 2 (0 accepted)." in report


def test_a_project_that_fails_keeps_its_cached_entry_while_the_others_refresh(registry, lock, tmp_path):
    fetch_advisories(lock=lock, directory=tmp_path, index_url=registry.url, today=NOVEMBER)
    registry.json("/pypi/django/json", {"message": "Internal Server Error"}, status=500)

    notes = fetch_advisories(lock=lock, directory=tmp_path, index_url=registry.url, today=DECEMBER)
    assert "PyPI JSON API: 1 projects could not be fetched (Django: HTTP 500)." in notes
    [pypi] = [s for s in load_database(directory=tmp_path).sources if s.key == "pypi"]
    assert {name: c.date for name, c in pypi.covers.items()} == {"django": NOVEMBER, "requests": DECEMBER}
    assert pypi.date == NOVEMBER  # a source is as old as its oldest entry
    assert "PYSEC-2026-1" in audit_report(lock, tmp_path, DECEMBER)


def test_a_wheel_that_does_not_match_its_digest_is_not_used(registry, lock, tmp_path):
    registry.publish_safety_db(tamper=True)
    notes = fetch_advisories(lock=lock, directory=tmp_path, index_url=registry.url, today=DECEMBER)
    assert (
        "safety-db could not be fetched (safety_db-2021.7.17-py2.py3-none-any.whl does not match its "
        "sha256 digest); no cached copy, so it is left out." in notes
    )
    assert [s.key for s in load_database(directory=tmp_path).sources] == ["pypi"]


def test_with_nothing_fetched_and_nothing_cached_there_is_no_database(lock, tmp_path, capsys):
    database = tmp_path / "advisories"
    args = ["--lock", str(lock), "--database", str(database)]
    assert advisory_fetch.main([*args, "--index-url", unreachable_url()]) == 0  # offline is no error here
    out = capsys.readouterr().out
    assert "advisory fetch: PyPI JSON API: no entry at all for: Django, requests, in-house-lib." in out
    assert out.rstrip().endswith("Nothing fetched and nothing cached: there is no advisory database.")
    assert dependency_audit.main(args) == 2
    assert "No advisory database at" in capsys.readouterr().err


def test_a_damaged_cached_database_is_replaced_by_a_fresh_one(registry, lock, tmp_path):
    (tmp_path / "advisories.json").write_text("{half a file", encoding="utf-8")
    notes = fetch_advisories(lock=lock, directory=tmp_path, index_url=registry.url, today=DECEMBER)
    assert notes[0].startswith("The cached database cannot be used (")
    assert "is not JSON" in notes[0] and notes[0].endswith("; it will be replaced.")
    assert [s.key for s in load_database(directory=tmp_path).sources] == ["pypi", "safety-db"]
