"""Triage rules are data (diagnostics/triage/rules.yaml): each names a taxonomy category, a
severity, RE2 patterns matched per line (and patterns that veto a line), the root cause and
the fix, and lines it must and must not match (run by the tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import re2
import yaml

from core.taxonomy import CATEGORIES

RULES_FILE = Path(__file__).parent / "rules.yaml"
SEVERITIES = ("fatal", "error", "warning", "symptom")  # most to least causal
_KEYS = {
    "id", "category", "severity", "sources", "patterns", "unless", "when",
    "root_cause", "fix", "note", "tests",
}  # fmt: skip


class RuleError(ValueError):
    """A rules file that breaks the schema; the message names the rule."""


@dataclass(frozen=True)
class Rule:
    id: str
    category: str
    severity: str
    patterns: tuple[str, ...]
    root_cause: str
    fix: str
    unless: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    # A combination: the rule counts only where a finding of one of these categories is found
    # too, and those findings become part of it (an OOM in a log whose engine then failed to
    # start is "not enough memory to load").
    when: tuple[str, ...] = ()
    note: str = ""
    tests: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self.severity)


def _compile(pattern: str, where: str) -> Any:
    try:
        return re2.compile(pattern.encode())
    except re2.error as exc:
        raise RuleError(f"{where}: pattern {pattern!r} is not RE2 syntax: {exc}") from None


def parse(data: Any, *, source: str = "rules.yaml") -> tuple[Rule, ...]:
    if not isinstance(data, list) or not data:
        raise RuleError(f"{source}: a non-empty list of rules")
    rules, seen = [], set()
    for i, raw in enumerate(data):
        where = f"{source} rule {i + 1}"
        if not isinstance(raw, dict):
            raise RuleError(f"{where}: a rule is a mapping")
        where = f"{source} rule {raw.get('id', i + 1)!r}"
        extra = sorted(set(raw) - _KEYS)
        if extra:
            raise RuleError(f"{where}: unknown key(s) {', '.join(extra)}")
        for key in ("id", "category", "severity", "root_cause", "fix"):
            if not isinstance(raw.get(key), str) or not raw[key].strip():
                raise RuleError(f"{where}: {key!r} is missing")
        if raw["id"] in seen:
            raise RuleError(f"{where}: the id is used twice")
        seen.add(raw["id"])
        if raw["category"] not in CATEGORIES:
            raise RuleError(f"{where}: unknown category {raw['category']!r}")
        if raw["severity"] not in SEVERITIES:
            raise RuleError(f"{where}: severity must be one of {', '.join(SEVERITIES)}")
        patterns = raw.get("patterns")
        if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) for p in patterns):
            raise RuleError(f"{where}: 'patterns' must be a non-empty list of strings")
        unless = raw.get("unless", []) or []
        for pattern in (*patterns, *unless):
            _compile(pattern, where)
        when = raw.get("when", []) or []
        if not isinstance(when, list) or not all(c in CATEGORIES for c in when):
            raise RuleError(f"{where}: 'when' must be a list of taxonomy categories")
        tests = raw.get("tests", {}) or {}
        rules.append(
            Rule(
                id=raw["id"],
                category=raw["category"],
                severity=raw["severity"],
                patterns=tuple(patterns),
                unless=tuple(unless),
                root_cause=raw["root_cause"].strip(),
                fix=raw["fix"].strip(),
                sources=tuple(raw.get("sources", []) or []),
                when=tuple(when),
                note=str(raw.get("note", "")).strip(),
                tests={k: tuple(v) for k, v in tests.items()},
            )
        )
    return tuple(rules)


def load(path: Path = RULES_FILE) -> tuple[Rule, ...]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RuleError(f"{path.name}: not valid YAML: {exc}") from None
    return parse(data, source=path.name)


@cache
def shipped() -> tuple[Rule, ...]:
    return load()
