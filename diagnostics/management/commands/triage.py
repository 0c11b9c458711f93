"""`manage.py triage FILE [--json]`: the triage page's answer for a log file (or - for
stdin), read in one pass with bounded memory."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from diagnostics.triage.engine import TriageInputError, english_label, triage_path, triage_stream


class Command(BaseCommand):
    help = "Triage a log: the failure category, root cause, fix and the matched lines."

    def add_arguments(self, parser):
        parser.add_argument("file", help="a log file (plain or .gz), or - for standard input")
        parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
        parser.add_argument(
            "--window", type=int, default=1, help="minutes per window of the access-log analysis"
        )

    def handle(self, *args: Any, file: str, **options: Any) -> None:
        if options["window"] < 1:
            raise CommandError("--window must be at least 1 minute")
        try:
            if file == "-":
                result = triage_stream(sys.stdin.buffer, window_minutes=options["window"])
            else:
                result = triage_path(file, window_minutes=options["window"])
        except TriageInputError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        data = result.to_dict()
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
            return
        self.stdout.write(_text(data))


def _text(data: dict[str, Any]) -> str:
    lines = [f"{data['lines']:,} lines read ({', '.join(data['sources']) or 'unknown source'})"]
    if not data["category"] and data.get("unsure"):
        lines.append("No category: no rule is sure. The lines that look most like a failure:")
        lines += [f"{u['line']:>8}: {u['text']}" for u in data["unsure"]["lines"]]
        for candidate in data["unsure"]["candidates"]:
            name, words = candidate["category"], ", ".join(candidate["hints"])
            lines.append(f"Candidate:  {english_label(name)} ({name}; words: {words})")
    elif not data["category"]:
        lines.append("No known failure found.")
    else:
        lines.append(f"Category:   {data['category_label']} ({data['category']})")
        lines.append(f"Root cause: {data['root_cause']}")
        lines.append(f"Fix:        {data['fix']}")
        for other in data["secondary"]:
            lines.append(
                f"Also:       {other['label']} from line {other['first_line']} ({other['count']} lines)"
            )
    for code in data["exit_codes"]:
        lines.append(f"Exit code {code['code']} at line {code['line']}: {code['meaning']}")
    if data["matches"]:
        lines.append("")
        lines += [f"{m['line']:>8}: {m['text']}  [{m['rule']}]" for m in data["matches"]]
    access = data.get("access_log")
    if access:
        lines += ["", f"Access log: {access['lines']:,} requests; top talkers:"]
        for t in access["top_talkers"]:
            lines.append(
                f"  {t['ip']:<39} {t['requests']:>8} ({t['share']:.0%})  429: {t['429']}  5xx: {t['5xx']}"
            )
    return "\n".join(lines)
