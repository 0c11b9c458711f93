"""`{{ stored_message|shown:fallback }}`: text stored as a message (core.i18n), in the reader's
language; a plain stored string as it is. `{{ count|grouped }}`: a whole number in the reader's
format."""

import math
from decimal import ROUND_HALF_UP, Decimal

from django import template
from django.template.defaultfilters import floatformat
from django.utils import formats

from core import i18n

register = template.Library()


@register.filter
def shown(message, fallback=""):
    return i18n.shown(message, fallback=fallback or "")


@register.filter
def grouped(value):
    """What floatformat:"0g" writes (rounded half up, grouped in the reader's format: 12,345 in
    English, 12345 in Chinese), without its Decimal arithmetic for a number: the sizing
    results partial writes a dozen on each keystroke."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return floatformat(value, "0g")
    if isinstance(value, float):
        if not math.isfinite(value):
            return floatformat(value, "0g")
        value = int(Decimal(repr(value)).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    return formats.number_format(value, force_grouping=True)
