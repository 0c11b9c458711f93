"""The log check: every alarm in the console's log, with its traceback, per process."""

import re

from soak.log_scan import Allowed, scan

LOG = """\
12:00:00 system | web started (pid=10)
12:00:00 web    | 2026-12-04 12:00:00,001 INFO django: fine
12:00:01 worker | [2026-12-04 12:00:01,000: ERROR/ForkPoolWorker-1] Task x raised unexpected: KeyError(3)
12:00:01 web    | 127.0.0.1 - - "POST /incidents/alertmanager/ HTTP/1.1" 200 30
12:00:01 worker | Traceback (most recent call last):
12:00:01 worker |   File "x.py", line 1, in f
12:00:01 worker |     raise ValueError
12:00:01 worker | ValueError: boom
12:00:01 worker |
12:00:01 worker | During handling of the above exception, another exception occurred:
12:00:01 worker |
12:00:01 worker | Traceback (most recent call last):
12:00:01 worker |   File "y.py", line 2, in g
12:00:01 worker | KeyError: 3
12:00:02 worker | [2026-12-04 12:00:02,000: INFO/MainProcess] Task y received
12:00:03 web    | [2026-12-04 12:00:03 +0000] [10] [CRITICAL] WORKER TIMEOUT (pid:11)
12:00:04 sim    | Traceback (most recent call last):
12:00:04 sim    |   File "z.py", line 9, in h
12:00:04 sim    | OSError: [Errno 24] Too many open files
"""


def test_it_finds_each_alarm_with_its_whole_traceback():
    findings, allowed = scan(LOG.splitlines())
    assert [(f.process, f.line_no) for f in findings] == [("worker", 3), ("web", 16), ("sim", 17)]
    assert allowed == 0
    worker = findings[0]
    assert len(worker.lines) == 11
    assert worker.headline == "KeyError: 3"
    assert findings[2].headline == "OSError: [Errno 24] Too many open files"


def test_a_line_of_another_process_does_not_cut_a_traceback():
    assert "ValueError: boom" in scan(LOG.splitlines())[0][0].text


def test_a_quiet_log_has_no_findings():
    quiet = [line for line in LOG.splitlines()[:4] if "ERROR" not in line]
    assert scan(quiet) == ([], 0)


def test_an_allowed_finding_is_counted_not_reported():
    rule = Allowed(pattern=re.compile(r"WORKER TIMEOUT"), why="a test", process="web")
    findings, allowed = scan(LOG.splitlines(), allowed=(rule,))
    assert [f.process for f in findings] == ["worker", "sim"]
    assert allowed == 1


def test_an_allowed_pattern_in_another_process_still_counts():
    rule = Allowed(pattern=re.compile(r"KeyError"), why="a test", process="web")
    findings, _ = scan(LOG.splitlines(), allowed=(rule,))
    assert "worker" in [f.process for f in findings]
