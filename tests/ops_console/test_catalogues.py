"""The Simplified Chinese catalogues: complete, current, compiled, and faithful to their
sources' placeholders and markup (docs/i18n.md)."""

from __future__ import annotations

import re
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.core.management import call_command

from ops_console.management.commands.makemessages import catalogues

BASE = Path(settings.BASE_DIR)
CATALOGUES = catalogues()
PLACEHOLDER = re.compile(r"%\([a-z_0-9]+\)[-+ #0-9.]*[sdfiegrx%]|%[sd]|\{[a-z_0-9]*\}")
TAG = re.compile(r"</?([a-z][a-z0-9]*)\b")


def _po(catalogue: str) -> polib.POFile:
    path = BASE / catalogue / "zh_Hans" / "LC_MESSAGES" / "django.po"
    assert path.exists(), f"{catalogue} has no zh_Hans catalogue: run `make messages`"
    return polib.pofile(str(path))


def test_every_catalogue_is_loaded_when_the_console_runs():
    assert sorted(Path(p).relative_to(BASE).as_posix() for p in settings.LOCALE_PATHS) == sorted(CATALOGUES)


def test_the_catalogues_hold_every_message_the_sources_mark_and_no_other():
    call_command("makemessages", locale=["zh_Hans"], check=True, verbosity=0)


@pytest.mark.parametrize("catalogue", CATALOGUES)
def test_every_message_is_translated_and_none_is_fuzzy(catalogue):
    po = _po(catalogue)
    untranslated = [e.msgid for e in po.untranslated_entries()]
    fuzzy = [e.msgid for e in po.fuzzy_entries()]
    assert not untranslated, f"{catalogue}: {len(untranslated)} untranslated, e.g. {untranslated[:5]}"
    assert not fuzzy, f"{catalogue}: {len(fuzzy)} fuzzy, e.g. {fuzzy[:5]}"


@pytest.mark.parametrize("catalogue", CATALOGUES)
def test_the_compiled_catalogue_is_the_one_in_the_source(catalogue):
    po = _po(catalogue)
    mo_path = BASE / catalogue / "zh_Hans" / "LC_MESSAGES" / "django.mo"
    assert mo_path.exists(), f"{catalogue}: no django.mo; run `make messages`"
    compiled = {
        (e.msgctxt, e.msgid): (e.msgstr, tuple(sorted(e.msgstr_plural.items())))
        for e in polib.mofile(str(mo_path))
        if e.msgid
    }
    source = {
        (e.msgctxt, e.msgid): (e.msgstr, tuple(sorted((int(k), v) for k, v in e.msgstr_plural.items())))
        for e in po.translated_entries()
    }
    assert compiled == source, f"{catalogue}: django.mo is stale; run `make messages`"


@pytest.mark.parametrize("catalogue", CATALOGUES)
def test_translations_keep_their_sources_placeholders_and_markup(catalogue):
    wrong = []
    for entry in _po(catalogue).translated_entries():
        translations = [entry.msgstr] if entry.msgstr else list(entry.msgstr_plural.values())
        source = entry.msgid if not entry.msgid_plural else entry.msgid_plural
        for text in translations:
            if ("python-format" in entry.flags or "python-brace-format" in entry.flags) and (
                sorted(PLACEHOLDER.findall(source)) != sorted(PLACEHOLDER.findall(text))
                and not entry.msgid_plural
            ):
                wrong.append(f"placeholders: {entry.msgid!r} -> {text!r}")
            if sorted(TAG.findall(entry.msgid)) != sorted(TAG.findall(text)):
                wrong.append(f"markup: {entry.msgid!r} -> {text!r}")
    assert not wrong, f"{catalogue}:\n" + "\n".join(wrong[:20])


def test_a_message_in_two_catalogues_reads_the_same_in_both():
    """At run time the catalogues merge and the first in LOCALE_PATHS wins: a message two
    areas share must say the same in both, or take a context (pgettext) where it means
    something else."""
    seen: dict[tuple[str | None, str], tuple[str, str]] = {}
    differ = []
    for catalogue in CATALOGUES:
        for entry in _po(catalogue).translated_entries():
            if entry.msgid_plural:
                continue
            key = (entry.msgctxt, entry.msgid)
            if key in seen and seen[key][1] != entry.msgstr:
                first, said = seen[key]
                differ.append(f"{entry.msgid!r}: {first} {said!r}, {catalogue} {entry.msgstr!r}")
            seen.setdefault(key, (catalogue, entry.msgstr))
    assert not differ, f"{len(differ)} shared messages read differently:\n" + "\n".join(differ)
