from django import template

register = template.Library()


@register.filter
def kind_label(obj) -> str:
    return str(obj._meta.verbose_name)


@register.filter
def get_item(mapping, key):
    return mapping.get(key)
