"""Turning a value as a file wrote it (YAML scalar, list, or CSV cell) into a model value.

An empty value (a blank CSV cell, YAML null or "") means the field's blank or default
value. YAML numbers are refused for text fields, because YAML reads 12.10 as 12.1. A GPU's model
may be written as nvidia-smi prints it; it is stored as the catalogue key. Text holding a
character no inventory may hold (a YAML escape such as "\\0") and numbers that are not finite
(YAML's .nan and .inf) are refused.
"""

from __future__ import annotations

import math
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext

from core.i18n import shown
from fleet import gpu_names
from fleet.inventory_io.characters import UNPRINTABLE, codepoint
from fleet.inventory_io.records import KINDS

_INT_LISTS = frozenset({"nvlink_peers", "gpus"})
_TEXT_LISTS = frozenset({"tags", "instances"})
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def coerce(*, kind: str, name: str, raw: Any) -> Any:
    """The model value for field `name` of a `kind` record; raises ValidationError."""
    _refuse_unprintable(raw)
    if name in _INT_LISTS:
        return [_list_item(item, int) for item in _as_list(raw)]
    if name in _TEXT_LISTS:
        return [_list_item(item, str) for item in _as_list(raw)]
    if name == "host":
        return _host_name(raw)
    if kind == "gpu" and name == "model" and raw not in (None, ""):
        return _gpu_model(raw)
    field = KINDS[kind]._meta.get_field(name)
    if raw is None or raw == "":
        return field.get_default()
    if isinstance(field, models.BooleanField):
        return _boolean(raw)
    if isinstance(field, models.CharField | models.TextField):
        return _text(raw)
    return _number(field, raw)


def _refuse_unprintable(raw: Any) -> None:
    for text in raw if isinstance(raw, list) else [raw]:
        found = UNPRINTABLE.search(text) if isinstance(text, str) else None
        if found:
            message = gettext("The text holds the character %(character)s, which an inventory may not hold.")
            raise ValidationError(message % {"character": codepoint(found.group())})


def _as_list(raw: Any) -> list[Any]:
    if raw is None or raw == "":
        return []
    if not isinstance(raw, list):
        raise ValidationError(gettext("Give a list."))
    return raw


def _list_item(item: Any, kind: type) -> Any:
    if kind is int:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise ValidationError(_not_a_whole_number(item))
        try:
            return int(item)
        except ValueError:
            raise ValidationError(_not_a_whole_number(item)) from None
    if not isinstance(item, str | int) or isinstance(item, bool):
        raise ValidationError(gettext("%(value)s is not text.") % {"value": shown_value(item)})
    return str(item)


def _not_a_whole_number(item: Any) -> str:
    return gettext("%(value)s is not a whole number.") % {"value": shown_value(item)}


def _host_name(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValidationError(gettext("Give the name of the host."))
    return raw.strip()


def _gpu_model(raw: Any) -> str:
    """A GPU's model by catalogue key or as nvidia-smi prints it ("NVIDIA A100-SXM4-80GB")."""
    text = _text(raw)
    gpu = gpu_names.find_gpu(text)
    if gpu is None:
        raise ValidationError(shown(gpu_names.unknown_gpu(text)))
    return gpu.key


def _boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise ValidationError(gettext("%(value)s is not true or false.") % {"value": shown_value(raw)})


def _number(field: models.Field, raw: Any) -> Any:
    integral = isinstance(raw, float) and raw.is_integer()
    if isinstance(raw, bool) or (
        isinstance(field, models.IntegerField) and isinstance(raw, float) and not integral
    ):
        raise ValidationError(_not_valid(field, raw))
    value = field.to_python(raw)
    if isinstance(value, float) and not math.isfinite(value):  # YAML's .nan, a CSV cell "inf"
        raise ValidationError(_not_valid(field, raw))
    return value


def _not_valid(field: models.Field, raw: Any) -> str:
    message = gettext("%(value)s is not a valid %(type)s.")
    return message % {"value": shown_value(raw), "type": str(field.description).lower()}


def _text(raw: Any) -> str:
    if isinstance(raw, bool | float) or not isinstance(raw, str | int):
        raise ValidationError(gettext("Write %(value)s as quoted text.") % {"value": shown_value(raw)})
    return str(raw)


def shown_value(value: Any) -> str:
    """A value as a message quotes it: its repr, cut short (a file may hold anything)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
