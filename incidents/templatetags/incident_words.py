"""{% load incident_words %}: words a drill's stored report keeps as values (a verdict, an
incident's status), in the reader's language."""

from __future__ import annotations

from django import template

from core.i18n import shown
from incidents import words
from incidents.models import Severity, Status

register = template.Library()


@register.filter
def verdict(value):  # noqa: ANN001, ANN201 (a template filter takes whatever the template has)
    return shown(words.verdict(value), fallback=str(value or ""))


@register.filter
def incident_status(value):  # noqa: ANN001, ANN201
    labels = dict(Status.choices)
    return str(labels[value]) if value in labels else value


@register.filter
def severity(value):  # noqa: ANN001, ANN201
    labels = dict(Severity.choices)
    return str(labels[value]) if value in labels else value


@register.filter
def family(value):  # noqa: ANN001, ANN201
    """A category family (oom, rate_limit) by its name in the reader's language."""
    return words.family(value)
