"""Lint an nginx config someone already runs: crossplane's parse (syntax errors with their
line), then the gateway rules the generator is held to, each finding with its line, why it
matters and the corrected snippet."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.translation import gettext as _

from diagnostics.configgen import nginx_rules

MAX_BYTES = 2_000_000


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
    if len(data) > MAX_BYTES:
        raise LintInputError(
            _("the config is %(size)s bytes; the linter reads up to %(limit)s")
            % {"size": f"{len(data):,}", "limit": f"{MAX_BYTES:,}"}
        )
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LintInputError(
                _("the config is not UTF-8 text (byte %(byte)s)") % {"byte": exc.start}
            ) from None
    if not data.strip():
        raise LintInputError(_("the config is empty"))
    return data


def lint(data: bytes | str, *, longest_generation_s: float = 120.0) -> LintResult:
    text = decode(data)
    parsed = nginx_rules.parse_text(text)
    (config,) = parsed["config"]
    errors = [(e.get("line"), _message(e["error"])) for e in config.get("errors", [])]
    if errors:
        return LintResult(syntax_errors=errors)
    directives = config["parsed"]
    context = nginx_rules.Context(longest_generation_s=longest_generation_s)
    return LintResult(
        findings=nginx_rules.check(directives, context),
        locations_checked=_count_locations(directives),
    )


def _message(error: str) -> str:
    """crossplane names the temporary file it parsed; the user pasted text."""
    return error.split(" in /")[0] if " in /" in error else error


def _count_locations(directives: list[dict]) -> int:
    total = 0
    for d in directives:
        total += d["directive"] == "location"
        total += _count_locations(d.get("block", []))
    return total
