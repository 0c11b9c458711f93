"""Durations and ratios for people: '9 min 20 s' and '0.7 %', in plain functions and as the
`duration` and `percent` template filters the incident pages and the review use."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.template import Context, Template

from incidents.people_format import duration, percent


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (45, "45 s"),
        (560, "9 min 20 s"),
        (540, "9 min"),
        (2 * 3600 + 5 * 60 + 59, "2 h 5 min"),
        (3600, "1 h"),
        (3 * 86400 + 4 * 3600 + 30 * 60, "3 d 4 h"),
        (0, "0 s"),
        (59.6, "1 min"),
        (timedelta(minutes=4, seconds=12), "4 min 12 s"),
        (-30, "−30 s"),
        (None, "—"),
    ],
)
def test_a_duration_shows_its_two_largest_units(value, shown):
    assert duration(value) == shown


@pytest.mark.parametrize(
    ("fraction", "shown"),
    [
        (0.007, "0.7 %"),
        (0.05, "5.0 %"),
        (0.12, "12 %"),
        (0.125, "13 %"),
        (0.0996, "10 %"),
        (1, "100 %"),
        (0, "0 %"),
        (0.00004, "< 0.1 %"),
        (None, "—"),
    ],
)
def test_a_percentage_has_one_decimal_under_ten_percent_and_none_above(fraction, shown):
    assert percent(fraction) == shown


def test_the_template_filters_call_the_same_functions():
    template = Template("{% load people %}{{ a|duration }} | {{ b|percent }} | {{ c|duration }}")
    context = Context({"a": timedelta(seconds=560), "b": 0.007, "c": None})
    assert template.render(context) == "9 min 20 s | 0.7 % | —"
