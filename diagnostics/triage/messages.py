"""The texts of this area's YAML data that people read, for `manage.py makemessages`.

rules.yaml is written in English and each text is its own msgid: a rule's root cause, fix and
note. (A finding's title is its category's label, which core/taxonomy.py marks itself.)
Commands and flags in backticks are identifiers and stay as they are in every language
(docs/i18n.md); the pages show them as code.
"""

from __future__ import annotations

from collections.abc import Iterator

from diagnostics.triage.rules import Rule, shipped

RULE_FIELDS = ("root_cause", "fix", "note")


def rule_texts(rule: Rule) -> Iterator[tuple[str, str]]:
    """(text, where) for each human-readable field of one rule."""
    for key in RULE_FIELDS:
        if getattr(rule, key):
            yield getattr(rule, key), f"rules.yaml rule {rule.id}: {key}"


def translatable_texts() -> Iterator[tuple[str, str]]:
    """Yield (text, where it is in the YAML) for each text shown to people."""
    for rule in shipped():
        yield from rule_texts(rule)
