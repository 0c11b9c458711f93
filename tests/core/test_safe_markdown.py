"""Markdown made inert for any renderer: script schemes and unsafe link schemes lose their
colon however they are spelled, raw HTML shows as text, web and mail links stay."""

from __future__ import annotations

import pytest

from core.safe_markdown import INERT_COLON, inert_line, inert_markdown
from tests.inert_html import live_parts

SCRIPT_LINKS = [
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](java\nscript:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](&#x6A;avascript&colon;alert(1))",
    "[x](&#0000106avascript:alert(1))",
    "[x](%6Aavascript:alert(1))",
    "[x](javascript\\:alert(1))",
    "[x](java&Tab;script:alert(1))",
    "[x](<javascript:alert(1)>)",
    "[x](\n  javascript:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x]\n\n[x]: javascript:alert(1)",
    "[x]\n\n[x]:\n   &#106;avascript:alert(1)",
    "![x](javascript:alert(1))",
]
OTHER_SCHEMES = [
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![x](data:image/svg+xml,<svg onload=alert(1)>)",
    "[x](DaTa:text/html,x)",
    "[x](file:///etc/passwd)",
    "[x]( < data:text/html,x>)",
    "[x]\n\n[x]: &#100;ata:text/html,x",
    "[x](ms-msdt:/id PCWDiagnostic)",
]
RAW_HTML = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg/onload=alert(1)>",
    "<a href='javascript:alert(1)'>x</a>",
    "<iframe src=//evil.example></iframe>",
    "<!-- --><style>body{display:none}</style>",
    "<javascript:alert(1)>",
    "<data:text/html,x>",
    "<div>\n<script>alert(1)</script>\n</div>",
]


@pytest.mark.parametrize("text", SCRIPT_LINKS + OTHER_SCHEMES + RAW_HTML)
def test_nothing_in_it_runs_once_rendered(text):
    # Some cases are live only in other renderers (CommonMark unescapes `\:`; some
    # renderers decode percent-encoding): all must be inert here.
    assert live_parts(inert_markdown(text)) == []


@pytest.mark.parametrize(
    "text", [SCRIPT_LINKS[0], SCRIPT_LINKS[4], OTHER_SCHEMES[0], RAW_HTML[0], RAW_HTML[1]]
)
def test_the_cases_are_live_as_written(text):
    assert live_parts(text)


@pytest.mark.parametrize("text", SCRIPT_LINKS)
def test_a_script_link_keeps_its_words_with_an_inert_colon(text):
    assert "script" + INERT_COLON + "alert(1)" in inert_markdown(text).replace("msgbox", "alert")


def test_a_script_scheme_in_prose_loses_its_colon_too():
    assert inert_markdown("Never paste javascript:alert(1) in the console") == (
        f"Never paste javascript{INERT_COLON}alert(1) in the console"
    )


def test_raw_html_shows_as_text():
    assert inert_markdown("<script>alert(1)</script>") == "&lt;script>alert(1)&lt;/script>"


@pytest.mark.parametrize(
    "text",
    [
        "[runbook](https://runbooks.example.com/kv-cache#pressure)",
        "[incident](/incidents/12/) and [mail](mailto:oncall@example.com)",
        "<https://grafana.example.com/d/kv>",
        "![graph](https://grafana.example.com/render/kv.png)",
        "[ref]\n\n[ref]: http://example.com/a?b=c",
        "KV cache < 95 %, prefill > decode, data: 3 GB",
        "**bold**, `code`, a list:\n\n- one\n- two",
    ],
)
def test_web_mail_and_relative_links_and_plain_markdown_stay_as_written(text):
    assert inert_markdown(text) == text


def test_attribute_lists_that_set_attributes_show_as_text():
    text = inert_markdown('[x](https://example.com){: onclick="alert(1)" }')
    assert text == '[x](https://example.com)&#123;: onclick="alert(1)" }'


def test_one_line_of_it_cannot_start_a_block_of_its_own():
    assert inert_line("title\n[x]: javascript:alert(1)\r\n# heading") == (
        f"title [x]: javascript{INERT_COLON}alert(1) # heading"
    )
