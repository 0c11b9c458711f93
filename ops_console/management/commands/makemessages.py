"""`makemessages`, routed by area: each source file's strings go to its area's catalogue.

Django's own command puts every top-level template's strings in the first LOCALE_PATHS entry
and cannot read the decision trees' and triage rules' YAML. This one

- routes each file by the ROUTES table below (templates follow the app they belong to),
- adds the texts of YAML data (TEXT_SOURCES: a function per area that yields them) to its
  area's catalogue, with the YAML place as a translator comment,
- extracts `core.i18n.later(...)` calls like gettext calls,
- with `--catalogue NAME`, refreshes that catalogue only (so people and helpers working on
  different areas do not overwrite each other's catalogues),
- with `--check`, writes nothing and fails when a catalogue lacks a source message or keeps
  one the sources no longer have (tests/ops_console/test_catalogues.py runs it).

docs/i18n.md says how the catalogues are laid out and kept.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import polib
from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands import makemessages

# (source path prefix, catalogue directory), most specific first; both relative to BASE_DIR.
PROBES = "fleet/probes/locale"
CONFIGGEN = "diagnostics/configgen/locale"
TREES = "diagnostics/trees/locale"
TRIAGE = "diagnostics/triage/locale"
ROUTES: list[tuple[str, str]] = [
    ("templates/fleet/instances/_state.html", PROBES),
    ("templates/fleet/instances/_probe_run.html", PROBES),
    ("templates/fleet/instances/_charts.html", PROBES),
    ("fleet/probes/", PROBES),
    ("fleet/nvml/", PROBES),
    ("fleet/charts.py", PROBES),
    ("fleet/series.py", PROBES),
    ("fleet/probe_service.py", PROBES),
    ("fleet/shown_state.py", PROBES),
    ("fleet/views/probing.py", PROBES),
    ("templates/fleet/", "fleet/locale"),
    ("fleet/", "fleet/locale"),
    ("templates/diagnostics/configs/", CONFIGGEN),
    ("diagnostics/configgen", CONFIGGEN),  # configgen/, configgen_forms.py, configgen_fill.py
    ("diagnostics/views/configs.py", CONFIGGEN),
    ("templates/diagnostics/troubleshoot/", TREES),
    ("diagnostics/trees/", TREES),
    ("diagnostics/views/troubleshoot.py", TREES),
    ("templates/diagnostics/triage/", TRIAGE),
    ("diagnostics/triage", TRIAGE),  # triage/ and triage_service.py
    ("diagnostics/views/triage.py", TRIAGE),
    ("templates/diagnostics/", "diagnostics/locale"),
    ("diagnostics/", "diagnostics/locale"),
    ("templates/incidents/", "incidents/locale"),
    ("incidents/", "incidents/locale"),
    ("", "locale"),  # the layout, error pages, sign-in, home page, core/ and ops_console/
]

# Per area, a function yielding (text, where) for the texts its YAML data shows to people.
TEXT_SOURCES: dict[str, str] = {
    "diagnostics/trees/": "diagnostics.trees.messages:translatable_texts",
    "diagnostics/triage/": "diagnostics.triage.messages:translatable_texts",
}
YAML_TEXTS_FILE = "yaml_texts_for_makemessages.py"

# The header msgmerge writes, filled in (a fuzzy header is left out of the compiled catalogue;
# fixed dates keep a refresh that changes no message from changing the file).
HEADER_VALUES = {
    "Project-Id-Version": '"Project-Id-Version: LLM Ops Console\\n"',
    "Language": '"Language: {locale}\\n"',
    "Language-Team": '"Language-Team: LLM Ops Console\\n"',
    "Last-Translator": '"Last-Translator: LLM Ops Console\\n"',
    "POT-Creation-Date": '"POT-Creation-Date: 2026-12-04 00:00+0000\\n"',
    "PO-Revision-Date": '"PO-Revision-Date: 2026-12-04 00:00+0000\\n"',
}
HEADER_FIXES = re.compile(
    r'^"(Project-Id-Version|POT-Creation-Date|Language|Language-Team|Last-Translator|PO-Revision-Date):.*"$',
    re.M,
)

NOT_SOURCES = [
    "tests/*",
    "benchmarks/*",
    "docs/*",
    "static/*",
    "test-output/*",
    "node_modules/*",
    "var/*",
    "build/*",
]


def catalogue_for(path: str) -> str:
    """The catalogue directory (relative to BASE_DIR) that holds `path`'s strings."""
    path = path.removeprefix("./")
    return next(catalogue for prefix, catalogue in ROUTES if path.startswith(prefix))


def catalogues() -> list[str]:
    return list(dict.fromkeys(catalogue for _, catalogue in ROUTES))


class Command(makemessages.Command):
    help = makemessages.Command.help + " Routed by area; see docs/i18n.md."
    xgettext_options = [*makemessages.Command.xgettext_options, "--keyword=later"]

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--catalogue",
            action="append",
            default=[],
            choices=catalogues(),
            help="Refresh only this catalogue (repeatable). Default: all.",
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="Change nothing; fail when a catalogue lacks a source message or keeps an obsolete one.",
        )

    def handle(self, *args, **options):
        base = Path(settings.BASE_DIR)
        os.chdir(base)
        options["ignore_patterns"] = [*options.get("ignore_patterns", []), *NOT_SOURCES]
        options["no_obsolete"] = True
        self.only = set(options.pop("catalogue") or [])
        self.check_only = options.pop("check")
        self.work = Path(tempfile.mkdtemp(prefix="makemessages-")) if self.check_only else None
        written = self._write_yaml_texts(base)
        try:
            super().handle(*args, **options)
            if self.check_only:
                self._compare(base, options.get("locale") or ["zh_Hans"], options["domain"])
        finally:
            for path in written:
                path.unlink(missing_ok=True)
            if self.work:
                shutil.rmtree(self.work, ignore_errors=True)

    def find_files(self, root):
        files = super().find_files(root)
        kept = []
        for translatable in files:
            catalogue = catalogue_for(os.path.normpath(translatable.path))
            if self.only and catalogue not in self.only:
                continue
            translatable.locale_dir = self._locale_dir(catalogue)
            kept.append(translatable)
        self.locale_paths = list(dict.fromkeys(f.locale_dir for f in kept))
        return kept

    def _locale_dir(self, catalogue: str) -> str:
        real = Path(settings.BASE_DIR) / catalogue
        if not self.check_only:
            real.mkdir(parents=True, exist_ok=True)
            return str(real)
        copy = self.work / catalogue
        if not copy.exists():
            if real.exists():
                shutil.copytree(real, copy)
            else:
                copy.mkdir(parents=True)
        return str(copy)

    def write_po_file(self, potfile, locale):
        super().write_po_file(potfile, locale)
        pofile = Path(potfile).parent / locale / "LC_MESSAGES" / f"{self.domain}.po"
        text = pofile.read_text(encoding="utf-8")
        head, sep, rest = text.partition("\n\n")
        head = HEADER_FIXES.sub(lambda m: HEADER_VALUES[m.group(1)].format(locale=locale), head)
        head = head.replace("#, fuzzy\n", "", 1)
        pofile.write_text(head + sep + rest, encoding="utf-8")

    def _write_yaml_texts(self, base: Path) -> list[Path]:
        written = []
        for prefix, dotted in TEXT_SOURCES.items():
            if self.only and catalogue_for(prefix) not in self.only:
                continue
            module, _, name = dotted.partition(":")
            texts = getattr(importlib.import_module(module), name)()
            lines = ["# Generated by makemessages for the YAML texts below; deleted after the run.", ""]
            for text, where in texts:
                lines.append(f"# Translators: {where}")
                lines.append("# xgettext:no-python-format")
                lines.append(f"gettext_noop({text!r})")
            path = base / prefix / YAML_TEXTS_FILE
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            written.append(path)
        return written

    def _compare(self, base: Path, locales: list[str], domain: str) -> None:
        problems = []
        for catalogue in catalogues():
            if self.only and catalogue not in self.only:
                continue
            for locale in locales:
                relative = Path(catalogue) / locale / "LC_MESSAGES" / f"{domain}.po"
                fresh_path = self.work / relative
                if not fresh_path.exists():
                    continue
                kept_path = base / relative
                fresh = {(e.msgctxt, e.msgid) for e in polib.pofile(str(fresh_path)) if not e.obsolete}
                kept = (
                    {(e.msgctxt, e.msgid) for e in polib.pofile(str(kept_path)) if not e.obsolete}
                    if kept_path.exists()
                    else set()
                )
                for _ctxt, msgid in sorted(fresh - kept, key=str):
                    problems.append(f"{relative}: missing {msgid[:80]!r}")
                for _ctxt, msgid in sorted(kept - fresh, key=str):
                    problems.append(f"{relative}: obsolete {msgid[:80]!r}")
        if problems:
            shown = "\n".join(problems[:60])
            more = f"\n… and {len(problems) - 60} more" if len(problems) > 60 else ""
            raise CommandError(
                f"{len(problems)} catalogue entries are out of date with the sources "
                f"(run `make messages`, then translate):\n{shown}{more}"
            )
        self.stdout.write("Catalogues match the sources.")
