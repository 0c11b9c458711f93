"""Exit codes in logs, explained (corrections #4): 137 is any SIGKILL, not only the OOM killer."""

from __future__ import annotations

import re2
from django.utils.translation import gettext_noop

# English, as the result stores them; shown in the reader's language (diagnostics/triage/shown.py).
MEANINGS = {
    137: gettext_noop(
        "128 + 9 = SIGKILL: the OOM killer, a container memory limit (check OOMKilled), a liveness "
        "probe that killed it, or kill -9. Not proof of an OOM: check OOMKilled and dmesg."
    ),
    134: gettext_noop(
        "128 + 6 = SIGABRT: the process aborted itself, usually a failed assertion in CUDA or NCCL "
        "code; the lines just before it say which."
    ),
    139: gettext_noop(
        "128 + 11 = SIGSEGV: a segmentation fault, usually a bug (driver, kernel, library "
        "mismatch); upgrade and report it with the stack trace."
    ),
    143: gettext_noop(
        "128 + 15 = SIGTERM: asked to stop (a deploy, a scale-down, systemctl stop), not a crash."
    ),
    1: gettext_noop("a Python exception ended the process; the traceback above it names the cause."),
}
# "exit code 137", "Exit Code: 137", "exited with code 137", "status=137", "ExitCode": 137
PATTERN = rb'(?i)(?:exit(?:ed)?(?: with)?[ _]?(?:code|status)|"ExitCode"|status=)[":= ]*(\d{1,3})\b'
_CODE = re2.compile(PATTERN)


def find(line: bytes) -> list[dict]:
    found = []
    for match in _CODE.finditer(line):
        code = int(match.group(1))
        if code in MEANINGS:
            found.append({"code": code, "meaning": MEANINGS[code]})
    return found
