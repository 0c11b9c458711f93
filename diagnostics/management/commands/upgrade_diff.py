"""`manage.py upgrade_diff --from 0.8.5 --to 0.11.2 [--instance NAME] [--json] [--output DIR]`:
before a vLLM version bump, the metrics the console, the generated alert rules and the
generated dashboard read that the new version renames or drops, the launch flags that change,
the defaults that change with the sizing under both versions, and the regenerated configs.
Without --instance it covers every enabled vLLM instance of the inventory. A bad version or an
unknown instance is an error (exit status 1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, no_translations

from diagnostics.upgrades import service
from diagnostics.upgrades.diff import Report, SizingDiff
from diagnostics.upgrades.facts import VersionError

MARKS = {"bad": "[breaks]", "warning": "[warning]", "info": "[info]", "ok": "[ok]"}
FIGURES = (
    ("kv_cache_tokens", "KV cache tokens"),
    ("kv_cache_blocks", "KV cache blocks"),
    ("max_concurrency", "max concurrency at max_model_len"),
    ("concurrency_at_average", "requests of the average length at once"),
    ("max_num_seqs", "max_num_seqs"),
    ("max_num_batched_tokens", "max_num_batched_tokens"),
    ("gpu_memory_utilization", "gpu_memory_utilization"),
    ("available_kv_gib", "available KV cache per GPU (GiB)"),
    ("cuda_graphs_gib", "CUDA graphs taken from it (GiB)"),
)


class Command(BaseCommand):
    help = (
        "Before a vLLM upgrade: metrics renamed or dropped, flags and defaults that change, sizing, "
        "regenerated configs."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--from", dest="old", required=True, metavar="VERSION", help="the running version, like 0.8.5"
        )
        parser.add_argument(
            "--to", dest="new", required=True, metavar="VERSION", help="the version to move to, like 0.11.2"
        )
        parser.add_argument(
            "--instance", default="", help="one inventory instance (default: every enabled vLLM instance)"
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--output", help="also write the regenerated configs into this folder")

    @no_translations  # the terminal speaks English
    def handle(self, *args: Any, old: str, new: str, **options: Any) -> None:
        try:
            instance = service.find_instance(name=options["instance"]) if options["instance"] else None
            report = service.report(old, new, instance=instance)
        except (VersionError, service.UnknownInstance) as exc:
            raise CommandError(str(exc.args[0])) from None
        if options["output"]:
            folder = Path(options["output"])
            folder.mkdir(parents=True, exist_ok=True)
            for file in report.files:
                (folder / file.name).write_text(file.content)
                self.stderr.write(f"wrote {folder / file.name}")
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
            return
        self.stdout.write("\n".join(text_report(report)))


def text_report(report: Report) -> list[str]:
    scope = (
        f"instance {report.targets[0]}"
        if report.scope == "instance"
        else f"fleet ({len(report.targets)} vLLM instances)"
    )
    counts = report.counts()
    lines = [
        f"vLLM {report.old_label} -> {report.new_label}, {scope}: "
        f"{counts['bad']} break(s), {counts['warning']} warning(s)",
        "",
        "(a) Metrics",
    ]
    shown = [m for m in report.metrics if m.severity != "ok"]
    lines += [f"  {MARKS[m.severity]} {m.source}: {m.message}" for m in shown] or [
        "  nothing the new version renames or drops"
    ]
    for m in shown:
        lines += [f"      {advice}" for advice in m.advice]
    lines += ["", "(b) Launch flags"]
    lines += [
        f"  {MARKS[f.severity]} {f.change.subject} ({f.change.kind}, {f.change.version_label})"
        + (f" used by {', '.join(f.used_by)}" if f.used_by else "")
        + f": {f.message}"
        for f in report.flags
    ] or ["  no flag changes between these versions"]
    for command in report.commands:
        if command.dropped or command.added or command.changed:
            changes = [f"-{f}" for f in command.dropped] + [f"+{f}" for f in command.added]
            changes += [f"{f} {a} -> {b}" for f, a, b in command.changed]
            lines.append(f"  generated command of {command.target}: {', '.join(changes)}")
    lines += ["", "(c) Defaults"]
    lines += [f"  {d.change.subject} ({d.change.version_label}): {d.message}" for d in report.defaults] or [
        "  no default changes between these versions"
    ]
    for d in report.defaults:
        lines += [f"      {a}" for a in d.applies]
    lines += ["", "    Sizing (KV cache per GPU, from the calculator)"]
    for sizing in report.sizing:
        lines += _sizing_lines(sizing)
    if not report.sizing:
        lines.append("  no instance to size")
    lines += ["", "(d) Regenerated configs for vLLM " + report.new_label]
    lines += [f"  {f.name}" for f in report.files]
    lines += [f"  error: {e}" for e in report.errors]
    lines.append("  (write them with --output DIR, or take them from --json)")
    return lines


def _sizing_lines(sizing: SizingDiff) -> list[str]:
    lines = [f"  {sizing.target}:"]
    if sizing.problem:
        return lines + [f"    not sized: {sizing.problem}"]
    lines += [f"    note: {n}" for n in sizing.notes]
    summaries = [(str(case.title), case.summary(), case.problem) for case in sizing.cases]
    for title, summary, problem in summaries:
        if summary is None:
            lines.append(f"    {title}: not sized ({problem})")
    sized = [(title, summary) for title, summary, _ in summaries if summary]
    if sized:
        lines.append("    " + " | ".join(["figure".ljust(40), *(t for t, _ in sized)]))
        for key, name in FIGURES:
            lines.append("    " + " | ".join([name.ljust(40), *(f"{s[key]:,}" for _, s in sized)]))
        for title, summary in sized:
            if summary["error"]:
                lines.append(f"    {title} does not start: {summary['error']}")
    return lines
