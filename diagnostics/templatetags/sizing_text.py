"""`{{ fix|coded }}`: a sizing message (core.i18n) in the reader's language with its text
values (flags, config keys, commands) shown as code; a plain string, which the calculator
uses for a flag with its value, shown wholly as code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from core.i18n import Message

register = template.Library()


@register.filter
def coded(text: Any) -> SafeString | str:
    if isinstance(text, Mapping) and "msgid" in text:
        text = Message.from_json(text)
    if isinstance(text, Message):
        return _coded_message(text)
    if text:
        return format_html("<code>{}</code>", text)
    return ""


def _coded_message(message: Message) -> SafeString:
    values = {key: _coded_value(value) for key, value in message.params.items()}
    source = conditional_escape(gettext(message.msgid))
    try:
        return mark_safe(source % values if values else source)
    except (KeyError, ValueError, TypeError):
        source = conditional_escape(message.msgid)
        return mark_safe(source % values if values else source)


def _coded_value(value: Any) -> SafeString | str:
    if isinstance(value, Message):
        return _coded_message(value)
    if isinstance(value, str):
        return format_html("<code>{}</code>", value)
    return conditional_escape(value)


@register.filter
def coded_text(text: Any) -> SafeString | str:
    """Like `coded`, but a plain string is text (an error message written before messages were
    kept, or one from outside the calculator), not code."""
    if isinstance(text, Message) or (isinstance(text, Mapping) and "msgid" in text):
        return coded(text)
    return text or ""
