"""Module-name lists as quantization configs write them (`ignore`, `targets`,
`modules_to_not_convert`, `exclude_modules`, ...), matched against the checkpoint's tensor names.

An entry is a 're:' regular expression (compressed-tensors), a '*' wildcard (modelopt, gpt-oss),
or a name of whole dotted segments ('lm_head', 'mlp.gate', 'model.layers.3.self_attn'). A list
may hold thousands of plain names (GLM-5 FP8 lists 712), so those are one set lookup per run of
segments of a tensor's name; wildcards and regular expressions are tried one by one, so there
may be at most MAX_PATTERNS of them. Regular expressions run on RE2, in time linear in the name:
one a config gives cannot make the estimate hang (RE2 has no lookarounds or backreferences; a
config using them is refused, naming the entry).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2

from core.i18n import later
from diagnostics.sizing import bounds
from diagnostics.sizing.config_error import ConfigError

MAX_PATTERNS = 32  # wildcard and regular-expression entries of one config, all lists together


def normal(name: str) -> str:
    """A module name without the wrappers multimodal checkpoints add."""
    return name.replace("language_model.", "").replace("model.model.", "model.")


@dataclass(frozen=True)
class ModuleNames:
    plain: frozenset[str]
    wildcards: tuple[str, ...]
    regexes: tuple[Any, ...]  # compiled RE2 patterns

    @classmethod
    def of(cls, entries: Iterable[str]) -> ModuleNames:
        """The entries ready to match; ConfigError for a regular expression RE2 cannot run."""
        plain: set[str] = set()
        wildcards: list[str] = []
        regexes: list[Any] = []
        for entry in entries:
            if entry.startswith("re:"):
                regexes.append(_compiled(entry))
            elif "*" in entry:
                wildcards.append(normal(entry))
            else:
                plain.add(normal(entry))
        return cls(frozenset(plain), tuple(wildcards), tuple(regexes))

    @property
    def patterns(self) -> int:
        return len(self.wildcards) + len(self.regexes)

    def match(self, name: str) -> bool:
        """Whether any entry names the module `name` (see the module's docstring)."""
        name = normal(name)
        if self.plain:
            segments = name.split(".")
            runs = (
                ".".join(segments[start:end])
                for start in range(len(segments))
                for end in range(start + 1, len(segments) + 1)
            )
            if any(run in self.plain for run in runs):
                return True
        if any(regex.match(name) for regex in self.regexes):
            return True
        return any(
            fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + ".*")
            for pattern in self.wildcards
        )


def matches(name: str, entry: str) -> bool:
    """Whether one module-list entry names this module."""
    return ModuleNames.of([entry]).match(name)


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the refusal says what is wrong; RE2 need not log it too
    return options


_OPTIONS = _options()


def _compiled(entry: str) -> Any:
    try:
        return re2.compile(normal(entry[3:]), _OPTIONS)
    except re2.error as exc:
        raise ConfigError(
            later(
                "config.json quantization_config has a module pattern %(pattern)s that cannot be read "
                "(%(error)s); regular expressions without lookarounds or backreferences are read",
                pattern=bounds.shown(entry),
                error=_reason(exc),
            )
        ) from None


def _reason(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else exc
    return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


def check_patterns(lists: Iterable[ModuleNames]) -> None:
    """ConfigError when the lists hold more than MAX_PATTERNS wildcards and expressions."""
    count = sum(names.patterns for names in lists)
    if count > MAX_PATTERNS:
        raise ConfigError(
            later(
                "config.json quantization_config lists %(count)s module patterns (wildcards or 're:' "
                "expressions); at most %(limit)s are read",
                count=count,
                limit=MAX_PATTERNS,
            )
        )
