"""`grouped` writes what floatformat:"0g" writes, in both languages."""

import pytest
from django.template.defaultfilters import floatformat
from django.utils import translation

from ops_console.templatetags.shown import grouped

VALUES = [
    0, 7, -7, 999, 1000, 12345, -12345, 1234567, 10**12,
    0.4, 0.5, 1.5, 2.5, -2.5, 1234.49, 1234.5, 98765.4321, -0.4, 1e15,
    float("nan"), float("inf"), "1500", "x", None, True, "",
]  # fmt: skip


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_it_writes_what_floatformat_0g_writes(language):
    with translation.override(language):
        for value in VALUES:
            assert grouped(value) == floatformat(value, "0g"), (language, value)


def test_english_groups_by_thousands_and_chinese_does_not():
    with translation.override("en"):
        assert grouped(1234567) == "1,234,567"
    with translation.override("zh-hans"):
        assert grouped(1234567) == "1234567"
