"""The trees' texts as a reader sees them. The YAML is English and each text is its own msgid
(messages.py), so a text is shown through gettext; a translation quotes the identifiers it
keeps (commands, flags, metric names) in backticks, shown as code; the instance's address,
port, model and gateway are filled in after translating, so translations keep the
placeholders (commands.py). English texts have no backticks and read as they are written.

A saved walkthrough keeps the English texts it showed; where they are still the trees'
texts (or the title and outcome the console wrote), they are shown in the reader's language.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, pgettext

from core.i18n import shown as shown_message
from core.taxonomy import label
from diagnostics.trees.commands import Target, fill

_QUOTED = re.compile(r"`([^`\n]+)`")
OUTCOME_FIX = "\n\nFix: "  # how a saved walkthrough's outcome joins the cause and the fix
UNFINISHED = "unfinished"


def translated(text: str) -> str:
    """`text` from a tree in the active language (the English text where there is none)."""
    return gettext(text) if text else ""


def plain(text: str, *, target: Target | None = None) -> str:
    """Translated, filled in, without the backticks: for <title>, attributes and messages."""
    return fill(translated(text), target=target).replace("`", "")


def rich(text: str, *, target: Target | None = None) -> SafeString:
    """Translated and filled in, as HTML: escaped, with backticked identifiers as <code>."""
    parts = _QUOTED.split(fill(translated(text), target=target))
    return mark_safe(  # noqa: S308 - every part is escaped
        "".join(
            escape(part) if i % 2 == 0 else f"<code>{escape(part)}</code>" for i, part in enumerate(parts)
        )
    )


def by_label(by: str) -> str:
    """Who answered a step: the probes or the engineer."""
    labels = {"probe": pgettext("answered by", "probe"), "you": pgettext("answered by", "you")}
    return labels.get(by, by)


# --- saved walkthroughs ---------------------------------------------------------------------


def default_title(tree_title: str, cause: str) -> str:
    """The title the console gives a saved walkthrough that was saved without one."""
    title = f"{tree_title}: {cause or UNFINISHED}"
    return title if len(title) <= 200 else title[:199] + "…"


def _is_default(*, title: str, tree_title: str, outcome: str) -> bool:
    return bool(tree_title) and title == default_title(tree_title, _cause(outcome))


def _cause(outcome: str) -> str:
    return outcome.split(OUTCOME_FIX, 1)[0] if OUTCOME_FIX in outcome else ""


def _untranslated(*, tree_title: str, outcome: str) -> bool:
    """Whether the reader's language shows the title as it was written (English)."""
    cause = _cause(outcome)
    return translated(tree_title) == tree_title and (
        translated(cause) if cause else gettext("unfinished")
    ) == (cause or UNFINISHED)


def saved_title(*, title: str, tree_title: str, outcome: str) -> SafeString:
    """A saved walkthrough's title as HTML: the console's own in the reader's language (its
    identifiers as code), one a person typed as it is."""
    if not _is_default(title=title, tree_title=tree_title, outcome=outcome) or _untranslated(
        tree_title=tree_title, outcome=outcome
    ):
        return escape(title)
    cause = _cause(outcome)
    shown_cause = rich(cause) if cause else escape(gettext("unfinished"))
    return format_html(
        escape(gettext("%(tree)s: %(cause)s")).replace("%(tree)s", "{}").replace("%(cause)s", "{}"),
        rich(tree_title),
        shown_cause,
    )


def saved_plain_title(*, title: str, tree_title: str, outcome: str, category: str = "") -> str:
    """The same as text, for the page's <title> and messages. Where the translated root cause
    quotes identifiers (text cannot mark them), the root cause's category stands for it."""
    if not _is_default(title=title, tree_title=tree_title, outcome=outcome) or _untranslated(
        tree_title=tree_title, outcome=outcome
    ):
        return title
    cause = _cause(outcome)
    if not cause:
        shown_cause = gettext("unfinished")
    elif "`" in translated(cause) and category:
        shown_cause = label(category)
    else:
        shown_cause = plain(cause)
    return gettext("%(tree)s: %(cause)s") % {"tree": plain(tree_title), "cause": shown_cause}


def saved_outcome(outcome: str) -> SafeString:
    """The root cause and fix a saved walkthrough reached, as HTML, in the reader's language."""
    if OUTCOME_FIX not in outcome:
        return mark_safe(escape(outcome).replace("\n", "<br>"))  # noqa: S308 - escaped
    cause, fix = outcome.split(OUTCOME_FIX, 1)
    return format_html(
        "{}<br><br>{}",
        rich(cause),
        format_html(escape(gettext("Fix: %(fix)s")).replace("%(fix)s", "{}"), rich(fix)),
    )


def saved_step(step: Mapping[str, Any]) -> dict[str, Any]:
    """One stored step (question, answer, by, evidence) in the reader's language."""
    evidence = str(step.get("evidence") or "")
    return {
        "question": rich(str(step.get("question") or "")),
        "answer": rich(str(step.get("answer") or "")),
        "by": str(step.get("by") or ""),
        "by_label": by_label(str(step.get("by") or "")),
        "evidence": shown_message(step.get("evidence_message") or evidence, fallback=evidence),
    }
