"""Lint an nginx config someone already runs: crossplane's parse (syntax errors with their
line), then the gateway rules the generator is held to, each finding with its line, why it
matters and the corrected snippet."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.utils.translation import gettext as _

from diagnostics.configgen import nginx_rules

MAX_BYTES = 2_000_000
MAX_GENERATION_S = 7 * 86400  # a week: past any read timeout worth setting
MAX_FINDINGS = 500  # listed; one more finding says how many were left out


class LintInputError(ValueError):
    """Input that is not a config text the linter can read."""


@dataclass(frozen=True)
class LintResult:
    syntax_errors: list[tuple[int | None, str]] = field(default_factory=list)
    findings: list[nginx_rules.Finding] = field(default_factory=list)
    locations_checked: int = 0

    @property
    def clean(self) -> bool:
        return not self.syntax_errors and not any(f.severity in ("error", "warning") for f in self.findings)

    def to_dict(self) -> dict:
        return {
            "syntax_errors": [{"line": line, "message": message} for line, message in self.syntax_errors],
            "findings": [f.__dict__ for f in self.findings],
            "locations_checked": self.locations_checked,
        }


def decode(data: bytes | str) -> str:
    """The config's text: UTF-8, without NUL; LintInputError saying what else it is."""
    if len(data) > MAX_BYTES:
        raise LintInputError(
            _("the config is %(size)s bytes; the linter reads up to %(limit)s")
            % {"size": f"{len(data):,}", "limit": f"{MAX_BYTES:,}"}
        )
    if isinstance(data, str):
        data = _encoded(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LintInputError(
            _("the config is not UTF-8 text (byte %(byte)s)") % {"byte": exc.start}
        ) from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise LintInputError(
            _("the config holds a NUL byte (line %(line)s): it is not a text file") % {"line": line}
        )
    if not text.strip():
        raise LintInputError(_("the config is empty"))
    return text


def _encoded(text: str) -> bytes:
    """A pasted text as UTF-8; a lone surrogate (from bytes decoded leniently) stays one invalid
    byte sequence, for decode() to refuse with its place."""
    return text.encode("utf-8", errors="surrogatepass")


def lint(data: bytes | str, *, longest_generation_s: float = 120.0) -> LintResult:
    """Lint a config; LintInputError for input that is no config text, or a longest generation
    that is no number of seconds."""
    longest = _longest(longest_generation_s)
    text = decode(data)
    parsed = nginx_rules.parse_text(text)
    (config,) = parsed["config"]
    errors = [(e.get("line"), _message(e["error"])) for e in config.get("errors", [])]
    if errors:
        return LintResult(syntax_errors=errors)
    directives = config["parsed"]
    context = nginx_rules.Context(longest_generation_s=longest)
    return LintResult(
        findings=_shown(nginx_rules.check(directives, context)),
        locations_checked=_count_locations(directives),
    )


def _shown(findings: list[nginx_rules.Finding]) -> list[nginx_rules.Finding]:
    """The first MAX_FINDINGS findings, and one saying how many more there are: a config of
    thousands of servers would otherwise make a page of tens of megabytes."""
    if len(findings) <= MAX_FINDINGS:
        return findings
    count = f"{len(findings) - MAX_FINDINGS:,}"
    more = nginx_rules.Finding(
        "more_findings",
        "info",
        None,
        _("%(count)s more findings after these are not listed") % {"count": count},
        _("The same fixes usually clear them: fix these and lint the config again."),
        "",
    )
    return [*findings[:MAX_FINDINGS], more]


def _longest(seconds: float) -> float:
    if not (isinstance(seconds, int | float) and math.isfinite(seconds) and 0 < seconds <= MAX_GENERATION_S):
        raise LintInputError(
            _("the longest generation must be a number of seconds above 0 and at most %(limit)s")
            % {"limit": f"{MAX_GENERATION_S:,}"}
        )
    return float(seconds)


def _message(error: str) -> str:
    """crossplane names the temporary file it parsed; the user pasted text."""
    if error.startswith("maximum recursion depth exceeded"):  # crossplane parses blocks recursively
        return _("blocks are nested hundreds deep; nginx configs nest a few")
    if not error:  # crossplane ran out of tokens in a directive's arguments (a StopIteration)
        return _("the config ends inside a directive: a ; or { is missing")
    return error.split(" in /")[0] if " in /" in error else error


def _count_locations(directives: list[dict]) -> int:
    total = 0
    for d in directives:
        total += d["directive"] == "location"
        total += _count_locations(d.get("block", []))
    return total
