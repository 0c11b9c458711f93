"""{% load people %}: `duration` and `percent`, the template side of incidents.people_format."""

from __future__ import annotations

from django import template

from incidents import people_format

register = template.Library()


@register.filter
def duration(value):  # noqa: ANN001, ANN201 (a template filter takes whatever the template has)
    """Seconds or a timedelta as '9 min 20 s'; None or '' as '—'."""
    return people_format.duration(None if value == "" else value)


@register.filter
def percent(value):  # noqa: ANN001, ANN201
    """A fraction as '0.7 %' or '12 %'; None or '' as '—'."""
    return people_format.percent(None if value == "" else value)
