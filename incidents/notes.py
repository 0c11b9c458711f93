"""Markdown in notes, rendered and then sanitized: only harmless tags and attributes survive,
links get rel="noopener noreferrer"."""

from __future__ import annotations

import markdown
import nh3

TAGS = {"p", "br", "strong", "em", "code", "pre", "ul", "ol", "li", "blockquote", "a", "h3", "h4", "table",
        "thead", "tbody", "tr", "th", "td", "hr"}  # fmt: skip


def render(text: str) -> str:
    html = markdown.markdown(text, extensions=["fenced_code", "tables"])
    return nh3.clean(
        html, tags=TAGS, attributes={"a": {"href", "title"}}, url_schemes={"http", "https", "mailto"}
    )
