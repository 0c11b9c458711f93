"""Secrets taken out of container command lines and log text before they leave the host.

A flag's value is secret by launch_flags' rule (`redact_argv`); in free text (a
shell-wrapped command line, a log line) Bearer tokens, hf_ tokens, URL passwords and
`api_key=...`-style values are replaced too.
"""

from __future__ import annotations

import re

from fleet.hostchecks.launch_flags import REDACTED, redact_argv

# A flag and its value inside text: a shell-wrapped command line or a log line.
_FLAG_IN_TEXT = re.compile(
    r"(?<![\w-])(?P<flag>--[A-Za-z][\w.-]*)(?P<sep>=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"']+)"
)
_TEXT_SECRETS = (
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+"), rf"\1{REDACTED}"),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), REDACTED),
    (re.compile(r"(://[^/\s:@]+:)[^/\s@]+@"), rf"\1{REDACTED}@"),
    (
        re.compile(
            r"(?i)\b((?:[a-z][a-z0-9]*[-_])*(?:api[-_]?key|token|secret|password|passwd))\b"
            r"(['\"]?\s*[:=]\s*[\[(]?\s*['\"]?)(?!none\b|null\b)[^\s'\",;&)\]]+"
        ),
        rf"\1\2{REDACTED}",
    ),
)


def redact_secrets(text: str) -> str:
    """The text with Bearer tokens, hf_ tokens, URL passwords, `api_key=...`-style values and
    the values of secret flags (`--api-key abc`, by launch_flags' rule) replaced."""
    for pattern, replacement in _TEXT_SECRETS:
        text = pattern.sub(replacement, text)

    def flag_value(match: re.Match[str]) -> str:
        if redact_argv([match["flag"], match["value"]])[1] != REDACTED:
            return match[0]
        return f"{match['flag']}{match['sep']}{REDACTED}"

    return _FLAG_IN_TEXT.sub(flag_value, text)


def redact_command(argv: list[str]) -> tuple[str, ...]:
    """A command line redacted as launch_flags.redact_argv does; an argument that is itself a
    shell command (`sh -c "vllm serve ... --api-key X"`) is redacted as text."""
    return tuple(redact_secrets(arg) if any(c.isspace() for c in arg) else arg for arg in redact_argv(argv))
