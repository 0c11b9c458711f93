"""The console's processes: each Procfile entry found under it by its command line, and a
stop that needed a SIGKILL is not clean."""

import subprocess
import sys

from soak.processes import Console, roles_of, stop_console
from tests.conftest import wait_for

# A stand-in for honcho: the console's child runs the Procfile entry as its own child.
SPAWN = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', 'celery', 'worker'])\n"
    "time.sleep(60)\n"
)


def test_an_entry_is_found_below_the_console_with_its_children():
    console = subprocess.Popen([sys.executable, "-c", SPAWN])
    try:
        assert wait_for(lambda: "worker" in roles_of(console.pid), timeout=20)
        (worker,) = roles_of(console.pid)["worker"]
        assert worker != console.pid
    finally:
        for pid in roles_of(console.pid).get("worker", []):
            subprocess.run(["kill", str(pid)], check=False)
        console.kill()
        console.wait()


def _stopped_console(tmp_path, log_text):
    log = tmp_path / "console.log"
    log.write_text(log_text)
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return stop_console(Console(process=process, log_path=log))


def test_a_console_that_stopped_on_request_is_clean(tmp_path):
    stopped = _stopped_console(
        tmp_path, "12:00:00 system | SIGINT received\nConsole stopped cleanly in 1.0 s.\n"
    )
    assert stopped.clean


def test_a_stop_that_needed_a_sigkill_is_not_clean(tmp_path):
    log = "12:00:05 system | sending SIGKILL to worker (pid 12)\nConsole stopped cleanly in 5.7 s.\n"
    stopped = _stopped_console(tmp_path, log)
    assert stopped.killed == ("worker",)
    assert not stopped.clean
