"""CSV cells open as text in a spreadsheet, never as a formula."""

import pytest

from core.spreadsheet_cells import formula_safe


@pytest.mark.parametrize(
    "text",
    [
        '=HYPERLINK("http://evil.example","x")',
        "+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(A1)",
        "\t=1",
        "\r=1",
        "＝1+1",
    ],
)
def test_text_that_starts_like_a_formula_gets_a_leading_apostrophe(text):
    assert formula_safe(text) == "'" + text


@pytest.mark.parametrize("text", ["KV cache full", "", "'already quoted", "Qwen/Qwen3-8B", "a=b"])
def test_other_text_is_unchanged(text):
    assert formula_safe(text) == text
