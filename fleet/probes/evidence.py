"""A finding's evidence in the reader's language.

The worker writes a finding long before anyone reads it, so its evidence is kept as a
message (core.i18n): the English sentence stays in "evidence" (the API, logs, old rows)
and the message in "evidence_message". Every page that shows a finding asks here:

    shown_evidence(finding)   plain text in the active language (old rows: their English)
    evidence_html(finding)    the same as HTML, with the values taken from the server or the
                              inventory (paths, URLs, error text, flags) in <code translate="no">

A finding is the stored dict (InstanceState.findings, ProbeRun.findings, an incident's
evidence snapshot) or a fleet.probes.findings.Finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from core.i18n import Message, later, shown


def _parts(finding: Any) -> tuple[Any, str]:
    """(the stored message or None, the English evidence) of a dict or a Finding."""
    if isinstance(finding, Mapping):
        return finding.get("evidence_message"), str(finding.get("evidence") or "")
    return getattr(finding, "message", None), str(getattr(finding, "evidence", "") or "")


def shown_evidence(finding: Any) -> str:
    """The finding's evidence in the active language; the stored English when it has no
    message (rows stored before messages were kept)."""
    message, english = _parts(finding)
    return shown(message, fallback=english)


def evidence_html(finding: Any) -> SafeString:
    """The evidence as HTML in the active language: the message's own words translated,
    its raw values (the server's error text, paths, names) escaped in <code translate="no">."""
    message, english = _parts(finding)
    if isinstance(message, Mapping) and "msgid" in message:
        try:
            return message_html(Message.from_json(message))
        except (KeyError, TypeError, ValueError):
            pass
    return conditional_escape(english)


# A launch flag written in a message's own words (--max-num-queued-reqs): an identifier.
_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


def message_html(message: Message) -> SafeString:
    values = {key: _value_html(value) for key, value in message.params.items()}
    for text in (gettext(message.msgid), message.msgid):
        try:
            escaped = _FLAG.sub(r'<code translate="no">\g<0></code>', conditional_escape(text))
            return mark_safe(escaped % values if values else escaped)  # noqa: S308 (escaped above)
        except (KeyError, ValueError, TypeError):
            continue
    return conditional_escape(message.english())


def _value_html(value: Any) -> Any:
    if isinstance(value, Message):
        return message_html(value)
    if isinstance(value, str):
        return format_html('<code translate="no">{}</code>', value)
    return value  # numbers keep their %(x).1f formats


def joined(parts: Iterable[Message], *, sep: str = ";") -> Message | None:
    """Several messages as one, in order, joined by the language's "; " (sep ";") or ", "
    (sep ","); None when there are none."""
    found: Message | None = None
    for part in parts:
        if found is None:
            found = part
        elif sep == ";":
            found = later("%(first)s; %(then)s", first=found, then=part)
        else:
            found = later("%(first)s, %(then)s", first=found, then=part)
    return found
