"""`manage.py console` (what `make run` ends with): Ctrl-C stops every Procfile process and
exits 0; a process that dies by itself takes the others down and its exit code is returned."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _start(procfile: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "console", "--procfile", str(procfile)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_started(process: subprocess.Popen, names: int) -> list[str]:
    lines = []
    while sum("started (pid" in line for line in lines) < names:
        line = process.stdout.readline()
        assert line, "".join(lines)
        lines.append(line)
    return lines


def test_ctrl_c_stops_every_process_and_exits_zero(tmp_path):
    procfile = tmp_path / "Procfile"
    # A process that traps SIGTERM and still exits: the stop reaches the process itself.
    procfile.write_text(
        "one: python -c 'import time; time.sleep(60)'\n"
        "two: python -c 'import signal, sys, time;"
        " signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); time.sleep(60)'\n"
    )
    process = _start(procfile)
    _wait_started(process, 2)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=20)
    assert process.returncode == 0, out
    assert "one stopped" in out and "two stopped (rc=0)" in out
    assert "Console stopped cleanly" in out
    assert "SIGKILL" not in out


def test_a_process_that_dies_takes_the_console_down_with_its_exit_code(tmp_path):
    procfile = tmp_path / "Procfile"
    procfile.write_text(
        "crash: python -c 'import sys; sys.exit(3)'\nlong: python -c 'import time; time.sleep(60)'\n"
    )
    process = _start(procfile)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 3, out
    assert "Console stopped cleanly" not in out


def test_an_unknown_entry_to_leave_out_is_named(tmp_path):
    procfile = tmp_path / "Procfile"
    procfile.write_text("web: python -c 'pass'\n")
    result = subprocess.run(
        [sys.executable, "manage.py", "console", "--procfile", str(procfile), "--without", "wbe"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "no Procfile entry wbe; it has web" in result.stderr
