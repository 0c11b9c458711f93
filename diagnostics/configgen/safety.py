"""Values that may reach a generated config, checked by type and pattern at the boundary.

Generators render text for nginx, shells, YAML and Python; a newline, `;`, `{`, `}`, a quote
or `$` in the wrong place changes what that text means. Every value a form, the CLI or an
inventory record hands a generator goes through one of these checks first, and anything
else is refused with a message that names the field, never rendered.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from django.utils.translation import gettext as _
from django.utils.translation import pgettext

FORBIDDEN = ("\n", "\r", ";", "{", "}", '"', "'", "$", "`", "\\", "\x00")


class UnsafeValue(ValueError):
    """A value that cannot go into a config; the message names the field ("field: why", the
    why in the active language)."""


def _refused(field: str, message: str, **values: object) -> UnsafeValue:
    return UnsafeValue(f"{field}: " + (message % values if values else message))


def _refuse_forbidden(field: str, value: str) -> None:
    for char in FORBIDDEN:
        if char in value:
            shown = {"\n": _("a newline"), "\r": _("a carriage return"), "\x00": _("a NUL byte")}
            raise _refused(
                field, _("%(char)s cannot go into a config here"), char=shown.get(char, repr(char))
            )


_TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+=-]*$")
_HOST = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")  # DNS-1123 label: k8s, systemd, nginx names
_PATH = re.compile(r"^/[A-Za-z0-9._/-]*$")
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
_DURATION = re.compile(r"^(\d+)(ms|s|m|h)?$")
_SIZE = re.compile(r"^(\d+)([kKmMgG])?$")


def token(field: str, value: str, *, max_length: int = 200) -> str:
    """A model name, served name, image tag: letters, digits and . _ : / @ + = -."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if not value or len(value) > max_length or not _TOKEN.match(value):
        raise _refused(
            field, _("%(value)s may hold letters, digits and . _ : / @ + = - only"), value=repr(value)
        )
    return value


def name(field: str, value: str) -> str:
    """A DNS-1123 label (Kubernetes object, systemd unit, nginx upstream): a-z 0-9 and -."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if not _NAME.match(value):
        raise _refused(
            field, _("%(value)s must be lower-case letters, digits and -, at most 63"), value=repr(value)
        )
    return value


def host(field: str, value: str) -> str:
    """A host name or IP address (v4 or v6)."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    try:
        return str(ipaddress.ip_address(value.strip("[]")))
    except ValueError:
        pass
    if not _HOST.match(value):
        raise _refused(field, _("%(value)s is not a host name or IP address"), value=repr(value))
    return value


def host_port(field: str, value: str) -> str:
    """host:port, as an nginx upstream server takes it."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if value.startswith("["):
        address, _sep, port = value[1:].partition("]:")
        return f"[{host(field, address)}]:{port_number(field, port)}"
    address, sep, port = value.rpartition(":")
    if not sep:
        raise _refused(field, _("%(value)s needs a port, like 10.0.1.10:8000"), value=repr(value))
    return f"{host(field, address)}:{port_number(field, port)}"


def port_number(field: str, value: object) -> int:
    try:
        port = int(str(value))
    except ValueError:
        raise _refused(field, _("%(value)s is not a port number"), value=repr(value)) from None
    if not 1 <= port <= 65535:
        raise _refused(field, _("%(port)s is not a port (1-65535)"), port=port)
    return port


def url(field: str, value: str, *, schemes: tuple[str, ...] = ("http", "https")) -> str:
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if any(ch.isspace() for ch in value):
        raise _refused(field, _("a URL holds no spaces"))
    parts = urlsplit(value)
    if parts.scheme not in schemes or not parts.hostname:
        raise _refused(
            field,
            _("%(value)s is not an %(schemes)s URL"),
            value=repr(value),
            schemes=pgettext("URL schemes", " or ").join(schemes),
        )
    host(field, parts.hostname)
    return value


def path(field: str, value: str) -> str:
    """An absolute file path without spaces or shell metacharacters."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if not _PATH.match(value) or ".." in value.split("/"):
        raise _refused(
            field, _("%(value)s must be an absolute path of letters, digits and . _ / -"), value=repr(value)
        )
    return value


def env_name(field: str, value: str) -> str:
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if not _ENV.match(value):
        raise _refused(
            field, _("%(value)s must be an environment variable name (A-Z, 0-9, _)"), value=repr(value)
        )
    return value


def cidr(field: str, value: str) -> str:
    value = str(value).strip()
    _refuse_forbidden(field, value)
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError:
        raise _refused(
            field, _("%(value)s is not an address or CIDR block like 10.0.4.0/24"), value=repr(value)
        ) from None


def seconds(field: str, value: object, *, minimum: float = 0.001, maximum: float = 86400) -> float:
    """A duration: a number of seconds, or nginx-style 150s, 500ms, 3m, 1h."""
    text = str(value).strip()
    _refuse_forbidden(field, text)
    match = _DURATION.match(text)
    if match:
        number = int(match[1]) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[match[2]]
    else:
        try:
            number = float(text)
        except ValueError:
            raise _refused(
                field, _("%(value)s is not a duration like 150s, 500ms or 3m"), value=repr(text)
            ) from None
    if not minimum <= number <= maximum:
        raise _refused(
            field,
            _("%(value)s is outside %(low)s-%(high)s seconds"),
            value=text,
            low=f"{minimum:g}",
            high=f"{maximum:g}",
        )
    return number


def size_bytes(field: str, value: object, *, maximum: int = 1 << 40) -> int:
    """A size: bytes, or nginx-style 10m, 512k, 8g."""
    text = str(value).strip()
    _refuse_forbidden(field, text)
    match = _SIZE.match(text)
    if not match:
        raise _refused(field, _("%(value)s is not a size like 10m, 512k or 8g"), value=repr(text))
    number = (
        int(match[1]) * {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, None: 1}[(match[2] or "").lower() or None]
    )
    if not 0 < number <= maximum:
        raise _refused(field, _("%(value)s is outside 1 byte to %(gib)s GiB"), value=text, gib=maximum >> 30)
    return number


def integer(field: str, value: object, *, minimum: int = 0, maximum: int = 10_000_000) -> int:
    text = str(value).strip()
    _refuse_forbidden(field, text)
    try:
        number = int(text)
    except ValueError:
        raise _refused(field, _("%(value)s is not a whole number"), value=repr(text)) from None
    if not minimum <= number <= maximum:
        raise _refused(
            field, _("%(value)s is outside %(low)s-%(high)s"), value=number, low=minimum, high=maximum
        )
    return number


def number(field: str, value: object, *, minimum: float = 0.0, maximum: float = 1e9) -> float:
    text = str(value).strip()
    _refuse_forbidden(field, text)
    try:
        result = float(text)
    except ValueError:
        raise _refused(field, _("%(value)s is not a number"), value=repr(text)) from None
    if result != result or not minimum <= result <= maximum:
        raise _refused(
            field,
            _("%(value)s is outside %(low)s-%(high)s"),
            value=text,
            low=f"{minimum:g}",
            high=f"{maximum:g}",
        )
    return result


def text(field: str, value: str, *, max_length: int = 300) -> str:
    """Free text that goes into a quoted string (a description, an error message): no quotes,
    no $, no braces, no newlines."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if len(value) > max_length:
        raise _refused(field, _("at most %(count)s characters"), count=max_length)
    return value
