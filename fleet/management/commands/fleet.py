"""The inventory on the command line.

manage.py fleet import FILE [--dry-run] [--format csv|yaml]   (FILE may be - for stdin)
manage.py fleet export [--format yaml|csv] [--output FILE]
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.inventory_io import (
    ImportPlan,
    UnreadableFile,
    apply_import,
    counts_summary,
    detect_format,
    export_inventory,
    plan_import,
    text_of,
)

FORMATS = ("yaml", "csv")


class Command(BaseCommand):
    help = "Import or export the fleet inventory as YAML or CSV."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        importing = actions.add_parser("import", help="Create and update inventory from a file.")
        importing.add_argument("file", help="A .yaml, .yml or .csv file, or - for stdin.")
        importing.add_argument(
            "--format", choices=FORMATS, help="Default: from the file's extension (yaml for stdin)."
        )
        importing.add_argument(
            "--dry-run", action="store_true", help="Show what would change and change nothing."
        )
        exporting = actions.add_parser("export", help="Write the inventory out.")
        exporting.add_argument("--format", choices=FORMATS, default="yaml")
        exporting.add_argument("--output", help="A file to write (default: stdout).")

    def handle(self, *args, action: str, **options) -> None:
        if action == "import":
            self._import(options["file"], options["format"], options["dry_run"])
        else:
            self._export(options["format"], options["output"])

    def _import(self, file: str, fmt: str | None, dry_run: bool) -> None:
        plan = plan_import(text=_read(file), fmt=fmt or _format_of(file))
        if not plan.ok:
            for error in plan.errors:
                self.stderr.write(str(error))
            raise CommandError(f"{len(plan.errors)} error(s) in {file}; nothing was imported.")
        if dry_run:
            self._print_plan(plan)
            return
        result = apply_import(plan=plan, actor=None, source="cli")
        self.stdout.write(f"Imported {file}: {counts_summary(result.counts)}.")

    def _print_plan(self, plan: ImportPlan) -> None:
        for change in plan.changes:
            if change.action != "unchanged":
                self.stdout.write(str(change))
        self.stdout.write(f"Dry run, nothing changed; would be {counts_summary(plan.counts)}.")

    def _export(self, fmt: str, output: str | None) -> None:
        text = export_inventory(fmt=fmt)
        if output is None:
            self.stdout.write(text, ending="")
            return
        Path(output).write_text(text, encoding="utf-8")
        self.stderr.write(f"Wrote the inventory as {fmt} to {output}.")


def _format_of(file: str) -> str:
    if file == "-":
        return "yaml"
    try:
        return detect_format(file)
    except ValueError as exc:
        raise CommandError(f"{exc} Or pass --format.") from None


def _read(file: str) -> str:
    try:
        if file != "-":
            return text_of(Path(file).read_bytes())
        stream = getattr(sys.stdin, "buffer", None)  # a text stream in tests
        return text_of(stream.read()) if stream is not None else sys.stdin.read()
    except (OSError, UnreadableFile) as exc:
        raise CommandError(f"Cannot read {file}: {exc}") from None
