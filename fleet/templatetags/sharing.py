"""Template tags that show which instances share a base URL or GPUs (fleet.sharing)."""

from __future__ import annotations

from collections.abc import Iterable

from django import template
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from fleet.models import Instance
from fleet.sharing import Sharing, sharing_by_instance

register = template.Library()


@register.simple_tag
def instance_sharing(instance: Instance) -> Sharing:
    """{% instance_sharing instance as shared %}: what one saved instance shares."""
    if not getattr(instance, "pk", None):
        return Sharing()
    return sharing_by_instance([instance])[instance.pk]


@register.simple_tag
def page_sharing(instances: Iterable[Instance]) -> dict[int, Sharing]:
    """{% page_sharing page_obj as shared %}: {instance id: Sharing} for a list page, in two
    queries whatever its length."""
    return sharing_by_instance(list(instances))


@register.filter
def sharing_for(shared: dict[int, Sharing], instance: Instance) -> Sharing:
    return shared.get(instance.pk) or Sharing()


@register.simple_tag
def instance_links(instances: Iterable[Instance]) -> SafeString:
    """{% instance_links others as links %}: each instance's name linked to its page, comma-separated,
    to place inside a translated sentence."""
    return format_html_join(", ", '<a href="{}">{}</a>', ((i.get_absolute_url(), i.name) for i in instances))
