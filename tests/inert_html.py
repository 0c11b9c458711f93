"""What in a Markdown download would run once rendered: for the tests of the exports.

Rendered twice, by the bare Markdown library and with the extensions the console's notes use
(fenced code, tables), neither followed by nh3: a renderer elsewhere may sanitize nothing.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import markdown

# Everything those renderers write from Markdown itself; any other tag came from raw HTML.
MARKDOWN_TAGS = frozenset({
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "a", "img", "code", "pre", "em", "strong",
    "blockquote", "hr", "br", "table", "thead", "tbody", "tr", "th", "td",
})  # fmt: skip
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_C0_AND_SPACE = "".join(map(chr, range(0x21)))


def scheme_of(url: str) -> str | None:
    """The scheme a browser reads from an href or src (WHATWG URL: tabs and newlines go,
    leading and trailing C0 controls and spaces are stripped), or None for a relative one."""
    match = _SCHEME.match(re.sub(r"[\t\n\r]", "", url).strip(_C0_AND_SPACE))
    return match.group(1).lower() if match else None


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)  # attribute values arrive decoded
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in MARKDOWN_TAGS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on") or name == "style":
                self.found.append(f"{tag} {name}=")
            elif name in {"href", "src"} and scheme_of(value or "") not in {None, *SAFE_SCHEMES}:
                self.found.append(f"{tag} {name}={value}")

    handle_startendtag = handle_starttag


def live_parts(markdown_text: str) -> list[str]:
    """Tags Markdown does not write, event-handler and style attributes, and links or images
    to a scheme other than http, https and mailto; empty when the text is inert."""
    found: list[str] = []
    for html in (
        markdown.markdown(markdown_text),
        markdown.markdown(markdown_text, extensions=["fenced_code", "tables"]),
    ):
        elements = _Elements()
        elements.feed(html)
        elements.close()
        found += elements.found
    return found
