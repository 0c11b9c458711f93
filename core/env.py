"""Strict readers for settings taken from environment variables.

Each fails loudly on a value it cannot read, instead of silently falling back:
an operator who sets DEBUG=yes should learn at start-up that it means nothing.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"Unexpected value {name}={raw!r}: use true or false.")


def env_int(name: str, default: int, *, minimum: int = 0, maximum: int = 2**31) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"Unexpected value {name}={raw!r}: expected a whole number.") from None
    if not minimum <= value <= maximum:
        raise ImproperlyConfigured(f"{name}={value} is out of range {minimum}..{maximum}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: list[str]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"Unexpected value {name}={raw!r}: use one of {', '.join(choices)}.")
    return value
