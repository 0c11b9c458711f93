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

FORBIDDEN = ("\n", "\r", ";", "{", "}", '"', "'", "$", "`", "\\", "\x00")


class UnsafeValue(ValueError):
    """A value that cannot go into a config; the message names the field."""


def _refuse_forbidden(field: str, value: str) -> None:
    for char in FORBIDDEN:
        if char in value:
            shown = {"\n": "a newline", "\r": "a carriage return", "\x00": "a NUL byte"}.get(char, repr(char))
            raise UnsafeValue(f"{field}: {shown} cannot go into a config here")


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
        raise UnsafeValue(f"{field}: {value!r} may hold letters, digits and . _ : / @ + = - only")
    return value


def name(field: str, value: str) -> str:
    """A DNS-1123 label (Kubernetes object, systemd unit, nginx upstream): a-z 0-9 and -."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if not _NAME.match(value):
        raise UnsafeValue(f"{field}: {value!r} must be lower-case letters, digits and -, at most 63")
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
        raise UnsafeValue(f"{field}: {value!r} is not a host name or IP address")
    return value


def host_port(field: str, value: str) -> str:
    """host:port, as an nginx upstream server takes it."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if value.startswith("["):
        address, _, port = value[1:].partition("]:")
        return f"[{host(field, address)}]:{port_number(field, port)}"
    address, sep, port = value.rpartition(":")
    if not sep:
        raise UnsafeValue(f"{field}: {value!r} needs a port, like 10.0.1.10:8000")
    return f"{host(field, address)}:{port_number(field, port)}"


def port_number(field: str, value: object) -> int:
    try:
        port = int(str(value))
    except ValueError:
        raise UnsafeValue(f"{field}: {value!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise UnsafeValue(f"{field}: {port} is not a port (1-65535)")
    return port


def url(field: str, value: str, *, schemes: tuple[str, ...] = ("http", "https")) -> str:
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if any(ch.isspace() for ch in value):
        raise UnsafeValue(f"{field}: a URL holds no spaces")
    parts = urlsplit(value)
    if parts.scheme not in schemes or not parts.hostname:
        raise UnsafeValue(f"{field}: {value!r} is not an {' or '.join(schemes)} URL")
    host(field, parts.hostname)
    return value


def path(field: str, value: str) -> str:
    """An absolute file path without spaces or shell metacharacters."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if not _PATH.match(value) or ".." in value.split("/"):
        raise UnsafeValue(f"{field}: {value!r} must be an absolute path of letters, digits and . _ / -")
    return value


def env_name(field: str, value: str) -> str:
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if not _ENV.match(value):
        raise UnsafeValue(f"{field}: {value!r} must be an environment variable name (A-Z, 0-9, _)")
    return value


def cidr(field: str, value: str) -> str:
    value = str(value).strip()
    _refuse_forbidden(field, value)
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError:
        raise UnsafeValue(f"{field}: {value!r} is not an address or CIDR block like 10.0.4.0/24") from None


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
            raise UnsafeValue(f"{field}: {text!r} is not a duration like 150s, 500ms or 3m") from None
    if not minimum <= number <= maximum:
        raise UnsafeValue(f"{field}: {text} is outside {minimum:g}-{maximum:g} seconds")
    return number


def size_bytes(field: str, value: object, *, maximum: int = 1 << 40) -> int:
    """A size: bytes, or nginx-style 10m, 512k, 8g."""
    text = str(value).strip()
    _refuse_forbidden(field, text)
    match = _SIZE.match(text)
    if not match:
        raise UnsafeValue(f"{field}: {text!r} is not a size like 10m, 512k or 8g")
    number = (
        int(match[1]) * {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, None: 1}[(match[2] or "").lower() or None]
    )
    if not 0 < number <= maximum:
        raise UnsafeValue(f"{field}: {text} is outside 1 byte to {maximum >> 30} GiB")
    return number


def integer(field: str, value: object, *, minimum: int = 0, maximum: int = 10_000_000) -> int:
    text = str(value).strip()
    _refuse_forbidden(field, text)
    try:
        number = int(text)
    except ValueError:
        raise UnsafeValue(f"{field}: {text!r} is not a whole number") from None
    if not minimum <= number <= maximum:
        raise UnsafeValue(f"{field}: {number} is outside {minimum}-{maximum}")
    return number


def number(field: str, value: object, *, minimum: float = 0.0, maximum: float = 1e9) -> float:
    text = str(value).strip()
    _refuse_forbidden(field, text)
    try:
        result = float(text)
    except ValueError:
        raise UnsafeValue(f"{field}: {text!r} is not a number") from None
    if result != result or not minimum <= result <= maximum:
        raise UnsafeValue(f"{field}: {text} is outside {minimum:g}-{maximum:g}")
    return result


def text(field: str, value: str, *, max_length: int = 300) -> str:
    """Free text that goes into a quoted string (a description, an error message): no quotes,
    no $, no braces, no newlines."""
    value = str(value).strip()
    _refuse_forbidden(field, value)
    if len(value) > max_length:
        raise UnsafeValue(f"{field}: at most {max_length} characters")
    return value
