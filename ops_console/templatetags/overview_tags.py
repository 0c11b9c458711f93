"""`{% overview_groups ov.groups %}`, `{% overview_chips ov.healthy %}`,
`{% overview_notes ov.capacity %}` and `{% overview_filters ov %}`: the fleet overview's
repeated pieces, built in Python (ops_console.overview_html) rather than by an
include per tile."""

from django import template
from django.utils.safestring import SafeString

from ops_console import overview_html

register = template.Library()


@register.simple_tag
def overview_groups(groups) -> SafeString:
    return overview_html.groups(groups, overview_html.Words())


@register.simple_tag
def overview_chips(chips) -> SafeString:
    return overview_html.chips(chips)


@register.simple_tag
def overview_notes(notes) -> SafeString:
    return overview_html.notes(notes)


@register.simple_tag
def overview_filters(overview) -> SafeString:
    return overview_html.filters(overview)
