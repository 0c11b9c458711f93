"""Finding English left on a page rendered in Simplified Chinese.

What stays English on a Chinese page is an identifier: flag, metric and command names,
file paths, model and host names, units. Templates mark those by putting them in <code>,
<pre>, <kbd> or <samp>, or on an element with translate="no" (HTML's own attribute for
"do not translate this"). Everything else a person reads must be Chinese. Words in
ZH_KEEPS (zh_identifiers.txt beside this file: product names and terms the guide itself
writes in English) and words with digits, underscores, dots, slashes, inner capitals or
all capitals (GPU, vLLM, bf16, max_num_seqs) and flags (--max-num-seqs) are identifiers too.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

ZH_KEEPS = {
    line.strip().lower()
    for line in (Path(__file__).with_name("zh_identifiers.txt")).read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
}
SKIPPED = {"script", "style", "code", "pre", "kbd", "samp", "var", "svg", "math", "template", "noscript"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
READ_ATTRIBUTES = ("title", "placeholder", "aria-label", "alt", "aria-description")
TOKEN = re.compile(r"[A-Za-z0-9_./:@#%+-]*[A-Za-z][A-Za-z0-9_./:@#%+'-]*")


def is_english_word(token: str, names: set[str]) -> bool:
    if token.startswith("--"):  # a command-line flag, where markup cannot go (an attribute)
        return False
    token = token.strip("-'.:/#%+@")
    if len(token) < 2 or token.lower() in names or token.lower() in ZH_KEEPS:
        return False
    if re.search(r"[0-9_./:@#%+]", token) or token.isupper():
        return False
    if "-" in token:
        parts = token.split("-")
        if any(len(p) <= 2 or p.lower() in names for p in parts):
            return False
        return any(is_english_word(p, names) for p in parts)
    if any(c.isupper() for c in token[1:]):  # vLLM, SGLang, PostgreSQL
        return False
    return token.isalpha()


class _Reader(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.texts: list[str] = []

    def _skipping(self) -> bool:
        return any(skip for _, skip in self.stack)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        skip = tag in SKIPPED or attributes.get("translate") == "no"
        if not skip and not self._skipping():
            for name in READ_ATTRIBUTES:
                if attributes.get(name):
                    self.texts.append(attributes[name])
            if (
                tag == "input"
                and attributes.get("type") in {"submit", "button", "reset"}
                and attributes.get("value")
            ):
                self.texts.append(attributes["value"])
        if tag not in VOID:
            self.stack.append((tag, skip))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if not self._skipping() and data.strip():
            self.texts.append(data)


def visible_texts(html: str) -> list[str]:
    """The text a person reads on the page, identifiers left out (see the module's doc)."""
    reader = _Reader()
    reader.feed(html)
    return reader.texts


def english_left(html: str, *, names: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Each piece of text on the page that still has an English word, with the word."""
    texts = visible_texts(html)
    lowered = {n.lower() for n in names} | {p.lower() for n in names for p in re.split(r"[-_. ]", n)}
    found = []
    for text in texts:
        words = [t for t in TOKEN.findall(text) if is_english_word(t, lowered)]
        if words:
            found.append(f"{words[0]!r} in {' '.join(text.split())[:120]!r}")
    return found


def assert_speaks_chinese(response, *, names=frozenset(), where: str = "") -> None:
    """The response is a 200 page in zh-hans with no English left outside identifiers."""
    assert response.status_code == 200, (where, response.status_code)
    html = response.content.decode()
    assert '<html lang="zh-hans"' in html, f"{where}: not rendered in zh-hans"
    left = english_left(html, names=set(names))
    assert not left, f"{where}: {len(left)} English text(s) left:\n" + "\n".join(left[:40])
