"""The trees' commands are written for any instance (`http://HOST:8000`, `"model":"MODEL"`,
`http://GATEWAY`); walked for one instance, they are shown with its own address, port,
model name and gateway, ready to paste. What is not known stays a placeholder."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

# Only values that are safe inside the quotes the commands put around them.
_SAFE = re.compile(r"^[\w./:@+\-]+$")


@dataclass(frozen=True, kw_only=True)
class Target:
    """What a walkthrough for an instance knows about where the commands should point."""

    base_url: str = ""  # http://10.0.0.5:8000
    model: str = ""
    gateway_url: str = ""

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).hostname or ""

    @property
    def port(self) -> str:
        parts = urlsplit(self.base_url)
        if not parts.hostname:
            return ""
        return str(parts.port or (443 if parts.scheme == "https" else 80))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _safe(value: str) -> str:
    return value if value and _SAFE.match(value) else ""


def _rules(target: Target) -> list[tuple[str, str]]:
    """(pattern, replacement template) in the order they apply; the URL forms before the bare ones."""
    base, host, port = _safe(target.base_url.rstrip("/")), _safe(target.host), _safe(target.port)
    model, gateway = _safe(target.model), _safe(target.gateway_url.rstrip("/"))
    rules = []
    if base:
        rules += [(r"https?://HOST:8000", base), (r"\bHOST:8000\b", f"{host}:{port}")]
    if host and port:
        rules += [(r"\b(?:HOST|SERVER_IP) 8000\b", f"{host} {port}"), (r"\bSERVER_IP\b", host)]
        rules += [(r"(?<=[\s'=]):8000\b", f":{port}"), (r"\b(port|grep) 8000\b", rf"\1 {port}")]
        if not _is_ip(host):  # dig HOST, openssl -servername HOST want a name
            rules.append((r"\bHOST\b", host))
    if gateway:
        rules.append((r"https?://GATEWAY", gateway))
    if model:
        rules.append((r"\bMODEL\b", model))
    return rules


def fill(text: str, *, target: Target | None) -> str:
    """`text` with the placeholders the target knows replaced; unchanged without a target."""
    if target is None or not text:
        return text
    for pattern, value in _rules(target):
        text = re.sub(pattern, lambda match, value=value: match.expand(value), text)
    return text
