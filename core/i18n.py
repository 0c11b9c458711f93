"""Text the console writes now and shows later, in the reader's language.

A probe finding, an incident's timeline entry or a drill's report is made by a worker with no
reader, stored, and read later by an SRE in English or Chinese. Storing the English sentence
would fix the language at the moment it was written. So such text is stored as a message: the
English source (the catalogue's msgid) and its values, and translated when it is shown.

    evidence = later("connect took %(connect).2f s (> %(limit)s s)", connect=1.42, limit=1)
    finding.evidence = str(evidence)          # English, for logs, the API and old readers
    finding.evidence_message = evidence.to_json()
    ...
    shown(finding.evidence_message, fallback=finding.evidence)   # in the active language

`manage.py makemessages` extracts `later(...)` calls like `gettext(...)` (docs/i18n.md).
Values that are themselves messages are translated too; other values are shown as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext


@dataclass(frozen=True)
class Message:
    """An English sentence with %(name)s placeholders and the values that fill them."""

    msgid: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def translated(self) -> str:
        """In the active language; the English text where the catalogue lacks it."""
        values = {
            key: value.translated() if isinstance(value, Message) else value
            for key, value in self.params.items()
        }
        text = gettext(self.msgid)
        try:
            return text % values if values else text
        except (KeyError, ValueError, TypeError):
            # A translation whose placeholders do not match its source shows the source.
            return self.msgid % values if values else self.msgid

    def english(self) -> str:
        """The English sentence: the msgid itself, filled in (the console's source language
        is English and it has no English catalogue), without switching the active language."""
        values = {
            key: value.english() if isinstance(value, Message) else value
            for key, value in self.params.items()
        }
        return self.msgid % values if values else self.msgid

    def __str__(self) -> str:
        return self.english()

    def to_json(self) -> dict[str, Any]:
        return {
            "msgid": self.msgid,
            "params": {k: v.to_json() if isinstance(v, Message) else v for k, v in self.params.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Message:
        params = {
            key: cls.from_json(value) if _is_message(value) else value
            for key, value in (data.get("params") or {}).items()
        }
        return cls(str(data["msgid"]), params)


def later(msgid: str, /, **params: Any) -> Message:
    """Mark `msgid` for translation and keep it, with its values, to translate when shown."""
    return Message(msgid, params)


def shown(message: Message | Mapping[str, Any] | str | None, *, fallback: str = "") -> str:
    """The text to show the reader: a message (or its stored JSON) in the active language;
    a plain string (stored before messages were kept, or typed by a person) as it is."""
    if isinstance(message, Message):
        return message.translated()
    if _is_message(message):
        try:
            return Message.from_json(message).translated()
        except (KeyError, TypeError, ValueError):
            return fallback
    if isinstance(message, str) and message:
        return message
    return fallback


def _is_message(value: object) -> bool:
    return isinstance(value, Mapping) and "msgid" in value
