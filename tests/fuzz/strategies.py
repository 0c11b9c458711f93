"""Strategies the fuzz properties share."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def mutated(draw, texts: list[str], alphabet: st.SearchStrategy[str], max_edits: int = 8) -> str:
    """One of `texts`, a real input, with a few places replaced: by pieces of its format's
    syntax (`alphabet`) often, by any short text too, and up to three characters cut."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, max_edits))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        text = text[:at] + draw(st.one_of(alphabet, st.text(max_size=3))) + text[at + cut :]
    return text
