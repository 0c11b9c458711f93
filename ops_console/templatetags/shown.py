"""`{{ stored_message|shown:fallback }}`: text stored as a message (core.i18n), in the reader's
language; a plain stored string as it is."""

from django import template

from core import i18n

register = template.Library()


@register.filter
def shown(message, fallback=""):
    return i18n.shown(message, fallback=fallback or "")
