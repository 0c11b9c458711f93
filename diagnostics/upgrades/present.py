"""The report's messages as HTML in the reader's language: the text escaped, its `backticked`
identifiers and its text values (metric, flag and rule names, versions) as <code>, numbers as
they are, nested messages likewise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from core.i18n import Message


def html(message: Message | str | None) -> SafeString:
    if message is None:
        return mark_safe("")
    if not isinstance(message, Message):
        return _backticks(str(conditional_escape(str(message))))
    values = {key: _value(value) for key, value in message.params.items()}
    for msgid in (gettext(message.msgid), message.msgid):  # a broken translation shows the source
        template = _backticks(str(conditional_escape(msgid)))
        try:
            return mark_safe(template % values if values else template)  # noqa: S308 (escaped above)
        except (KeyError, ValueError, TypeError):
            continue
    return mark_safe(conditional_escape(message.msgid))


def _value(value: Any) -> Any:
    if isinstance(value, Message):
        return html(value)
    if isinstance(value, str):
        return format_html("<code>{}</code>", value)
    if isinstance(value, Mapping):
        return conditional_escape(str(value))
    return value


def _backticks(escaped: str) -> SafeString:
    """`a` -> <code>a</code> in already escaped text; an unpaired backtick is dropped."""
    parts = escaped.split("`")
    if len(parts) % 2 == 0:
        return mark_safe("".join(parts))  # noqa: S308 (escaped by the caller)
    return mark_safe("".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts)))  # noqa: S308
