"""A triage result in the reader's language, at display time.

A result is stored (an upload's run) in English: the rules' texts and the exit codes' meanings
are the catalogue's msgids, so they are translated when shown, for rows stored before this
module as for new ones; a finding's title is its category's label (core/taxonomy.py), named
again from the category key. The access story is data and is worded by
access_story.describe(). Log lines, excerpts, addresses and paths are shown as they are.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from core.taxonomy import label

CODE_SPAN = re.compile(r"`([^`\n]+)`")


def with_code(text: str) -> SafeString:
    """The text, escaped, with its `backticked` spans (commands, flags, paths) as <code>."""
    return mark_safe(CODE_SPAN.sub(r"<code>\1</code>", escape(text)))  # escaped first: safe


def translated(text: str) -> str:
    """A stored English text in the active language; an empty one stays empty."""
    return gettext(text) if text else ""


def shown_result(result: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of a stored result whose texts read in the active language."""
    if not result:
        return {}
    return {
        **result,
        "category_label": label(result["category"]) if result.get("category") else "",
        "root_cause": with_code(translated(result.get("root_cause", ""))),
        "fix": with_code(translated(result.get("fix", ""))),
        "secondary": [
            {**other, "label": translated(other["label"])} for other in result.get("secondary", [])
        ],
        "exit_codes": [
            {**code, "meaning": with_code(translated(code["meaning"]))}
            for code in result.get("exit_codes", [])
        ],
        "unsure": _shown_unsure(result.get("unsure")),
    }


def _shown_unsure(doubt: dict[str, Any] | None) -> dict[str, Any] | None:
    """No rule matched: the candidates named by their category's label."""
    if not doubt:
        return None
    return {
        **doubt,
        "candidates": [{**c, "label": label(c["category"])} for c in doubt.get("candidates", [])],
    }


def shown_story(story: dict[str, Any] | None) -> dict[str, Any] | None:
    """A described story (access_story.describe) whose fixes show their `code` spans."""
    if not story:
        return story
    causes = [{**cause, "fix": with_code(str(cause["fix"]))} for cause in story["described"]]
    return {**story, "described": causes}
