"""The words that incident records keep as messages (core.i18n): a category's or a rule's
name, a verdict, a choice's label. Each is kept by its English source, the catalogue's
msgid, so a timeline entry or a title written today reads in the language of whoever opens
it later."""

from __future__ import annotations

from typing import Any

from django.utils.translation import override, pgettext_lazy

from core.i18n import Message
from fleet.shown_state import STATE_LABELS


def english(text: Any) -> str:
    """A lazy translation's English source (its msgid), or the text as it is."""
    with override("en"):
        return str(text)


def word(text: Any) -> Message | str:
    """`text` (English, or lazy) kept as a message; blank as blank (gettext("") is the
    catalogue's header, not an empty word)."""
    source = english(text)
    return Message(source) if source else ""


def category(key: str) -> Message | str:
    """The category's name as the taxonomy (or "other") says it."""
    from incidents.models import CATEGORY_CHOICES

    return word(dict(CATEGORY_CHOICES).get(key, key))


def rule_name(name: str) -> Message | str:
    """An alert rule's name: the guide's rules are in the catalogue (core.alert_set); a name
    edited in the admin shows as it was typed."""
    return word(name)


def verdict(value: str) -> Message | str:
    return word(STATE_LABELS.get(value, value))


# The top of the taxonomy (core.taxonomy.family), as the review names it. The msgid is the
# key itself, so the English page keeps showing "oom", "rate_limit".
FAMILIES = {
    "timeout": pgettext_lazy("category family", "timeout"),
    "rate_limit": pgettext_lazy("category family", "rate_limit"),
    "oom": pgettext_lazy("category family", "oom"),
    "cuda": pgettext_lazy("category family", "cuda"),
    "model_loading": pgettext_lazy("category family", "model_loading"),
    "process": pgettext_lazy("category family", "process"),
    "server": pgettext_lazy("category family", "server"),
    "gpu": pgettext_lazy("category family", "gpu"),
    "network": pgettext_lazy("category family", "network"),
    "client": pgettext_lazy("category family", "client"),
    "config": pgettext_lazy("category family", "config"),
    "probe": pgettext_lazy("category family", "probe"),
    "routing": pgettext_lazy("category family", "routing"),
    "other": pgettext_lazy("category family", "other"),
}


def family(key: str) -> str:
    """A category family's name in the active language (the key itself if unknown)."""
    return str(FAMILIES.get(key, key))
