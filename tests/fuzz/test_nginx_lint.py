"""The nginx linter over any pasted or uploaded bytes: it ends with a result (syntax errors or
findings, each located) or a LintInputError, never another exception."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from diagnostics.configgen import nginx, nginx_lint
from tests.configgen.test_nginx_lint import GUIDE_TEMPLATE
from tests.hang import ends

GENERATED = nginx.render(nginx.GENERATOR.spec({}, preset="low_latency"))[0].content
PIECES = [
    "{", "}", ";", '"', "'", "\\", "#", "\n", "\x00", "\udcff", "location / {", "server {", "http {",
    "proxy_read_timeout 9999999999999999999999s;", "limit_req zone=a burst=1;", "burst=", "rate=",
    "include /etc/*.conf;", "proxy_set_header Connection '';", "map $a $b {", "upstream u {", "if ($x) {",
    "${", "~*", "=", "$", "9" * 400,
]  # fmt: skip
fragments = st.text(max_size=20) | st.sampled_from(PIECES)
edits = st.lists(st.tuples(st.floats(0, 1), st.integers(0, 30), fragments), min_size=1, max_size=6)


def _edit(text: str, changes: list[tuple[float, int, str]]) -> str:
    for where, length, piece in changes:
        at = int(where * len(text))
        text = text[:at] + piece + text[at + length :]
    return text


def _lints_or_refuses(data: str | bytes, longest: float = 120.0) -> None:
    try:
        result = ends(nginx_lint.lint, data, longest_generation_s=longest)
    except nginx_lint.LintInputError as refused:
        assert str(refused)
        return
    assert all(isinstance(message, str) and message for _, message in result.syntax_errors)
    assert len(result.findings) <= nginx_lint.MAX_FINDINGS + 1
    result.to_dict()


@given(data=st.text(max_size=400) | st.binary(max_size=400))
def test_any_text_or_bytes_are_linted_or_refused(data):
    _lints_or_refuses(data)


@given(base=st.sampled_from([GUIDE_TEMPLATE, GENERATED]), changes=edits)
def test_a_mutated_real_config_is_linted_or_refused(base, changes):
    _lints_or_refuses(_edit(base, changes))


@given(longest=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**70), 2**70))
def test_any_longest_generation_is_used_or_refused(longest):
    _lints_or_refuses(GUIDE_TEMPLATE, longest)
