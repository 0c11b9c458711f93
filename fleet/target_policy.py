"""Which addresses a probe may reach: inference servers, never the cloud's metadata service
or the console itself.

An sre types an instance's base URL (a gateway's URL, a host's dcgm-exporter URL) and the
worker fetches it, with the start of any answer shown in findings. So a target is refused
when it is, or resolves to:
- a link-local address (169.254.0.0/16, fe80::/10), where clouds serve instance metadata
  and credentials, or one of the metadata services' other addresses (fd00:ec2::254,
  100.100.100.200, 192.0.0.192);
- an address no server answers on as a target: unspecified (0.0.0.0, ::, which Linux
  connects to this machine), multicast, broadcast or reserved;
- the console itself: this machine's loopback and own addresses on the console's port, or
  a name the console serves under (ALLOWED_HOSTS, CSRF_TRUSTED_ORIGINS) on any port;
- in a deny list (PROBE_DENY_NETWORKS), or outside an allow list when one is set
  (PROBE_ALLOW_NETWORKS); metadata and link-local addresses stay refused whatever the lists.
A URL with credentials in it (http://user:pass@...) is refused too: keys belong in the
API key variable, not in a URL every viewer sees. Private ranges (10/8, 172.16/12,
192.168/16, fc00::/7) and loopback on other ports stay allowed: inference servers live there.

IPv4 addresses written as IPv6 (::ffff:169.254.169.254, ::169.254.169.254, the NAT64 prefix
64:ff9b::/96, 6to4 2002::/16) are judged as the IPv4 address they carry.

The check runs when a URL is saved (the literal address, and the name's addresses when it
resolves), and again at every connection a probe makes (fleet.probes.guarded_network), on
the address it is about to connect to: DNS can change between the two.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from core.i18n import Message, later

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle (v2)
        "169.254.170.2",  # AWS ECS task credentials
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (v1)
    )
)
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "metadata.goog", "instance-data"})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


class TargetRefused(ValueError):
    """A probe target the policy refuses; `message` says why in the reader's language."""

    def __init__(self, message: Message) -> None:
        super().__init__(str(message))
        self.message = message


def embedded_ipv4(address: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), else itself."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    packed = int(address)
    if packed >> 32 == 0 and packed > 1:  # ::a.b.c.d, the deprecated IPv4-compatible form
        return ipaddress.IPv4Address(packed)
    return address


@dataclass(frozen=True)
class Policy:
    """The lists from settings and the console's own listening addresses."""

    console_port: int | None = None
    console_names: frozenset[str] = frozenset()
    own_addresses: frozenset[Address] = frozenset()
    deny: tuple[Network, ...] = ()
    allow: tuple[Network, ...] = ()

    def check_address(self, address: Address | str, port: int) -> None:
        """TargetRefused when a probe must not connect to this address and port."""
        given = ipaddress.ip_address(address) if isinstance(address, str) else address
        if isinstance(given, ipaddress.IPv6Address) and given.scope_id:
            given = ipaddress.IPv6Address(str(given).split("%", 1)[0])
        ip = embedded_ipv4(given)
        shown = str(given) if ip == given else f"{given} ({ip})"
        if ip in METADATA_ADDRESSES:
            raise TargetRefused(
                later("%(address)s is a cloud metadata address: probes never reach it.", address=shown)
            )
        if ip.is_link_local:
            raise TargetRefused(
                later(
                    "%(address)s is a link-local address, where clouds serve instance metadata: "
                    "probes never reach it.",
                    address=shown,
                )
            )
        if ip.is_unspecified or ip.is_multicast or ip == ipaddress.IPv4Address("255.255.255.255"):
            raise TargetRefused(
                later(
                    "%(address)s is not an address a server answers on; give the server's own.",
                    address=shown,
                )
            )
        if ip.is_reserved:
            raise TargetRefused(later("%(address)s is in a reserved range.", address=shown))
        if port == self.console_port and (ip.is_loopback or ip in self.own_addresses):
            raise TargetRefused(
                later("%(address)s port %(port)s is this console itself.", address=shown, port=port)
            )
        if any(ip in network for network in self.deny):
            raise TargetRefused(
                later("%(address)s is in the probe deny list (PROBE_DENY_NETWORKS).", address=shown)
            )
        if self.allow and not any(ip in network for network in self.allow):
            raise TargetRefused(
                later("%(address)s is outside the probe allow list (PROBE_ALLOW_NETWORKS).", address=shown)
            )

    def check_name(self, host: str) -> None:
        """TargetRefused for a host name that is the metadata service or the console."""
        name = host.rstrip(".").lower()
        if name in METADATA_NAMES:
            raise TargetRefused(
                later("%(host)s is a cloud metadata service: probes never reach it.", host=host)
            )
        if name in self.console_names:
            raise TargetRefused(later("%(host)s is a name this console itself is served under.", host=host))

    def check_url(self, url: str, *, resolve: bool = False) -> None:
        """TargetRefused for a URL no probe may fetch. The literal address is always checked;
        a host name's addresses only with `resolve` (and a name that does not resolve here
        passes: the worker resolves it again, and checks, at every connection)."""
        try:
            parts = urlsplit(url.strip())
        except ValueError:  # "http://[10.0.0.1": the URL validator says what is wrong
            return
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise TargetRefused(
                later(
                    "Credentials in a URL are shown to every viewer: remove them and name the "
                    "environment variable that holds the API key instead."
                )
            )
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return  # the URL validator says what is wrong with the port
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            self.check_address(literal, port)
            return
        if not host:
            return
        self.check_name(host)
        if resolve:
            for address in _resolved_for_save(host):
                self.check_address(address, port)


# A save resolves the name once, briefly: a name only the worker's network knows, or a slow
# resolver, must not hold a form up (the worker checks again at every connection).
SAVE_RESOLVE_S = 2.0
_RESOLVER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="target-resolve")


def _getaddrinfo(host: str, port: int) -> list[Address]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


# An import saves thousands of URLs, many on one name: each name is resolved once a minute.
SAVE_RESOLVE_TTL_S = 60.0
_SAVED_NAMES: dict[str, tuple[float, list[Address]]] = {}


def _resolved_for_save(host: str) -> list[Address]:
    now = time.monotonic()
    cached = _SAVED_NAMES.get(host)
    if cached is not None and cached[0] > now:
        return cached[1]
    found = resolved(host, 0, timeout=SAVE_RESOLVE_S)
    if len(_SAVED_NAMES) >= 4096:
        _SAVED_NAMES.clear()
    _SAVED_NAMES[host] = (now + SAVE_RESOLVE_TTL_S, found)
    return found


def resolved(host: str, port: int, *, timeout: float | None = None) -> list[Address]:
    """The addresses a name resolves to; [] when it does not resolve (in `timeout` s)."""
    if timeout is None:
        return _getaddrinfo(host, port)
    try:
        return _RESOLVER.submit(_getaddrinfo, host, port).result(timeout=timeout)
    except FutureTimeout:
        return []


def _networks(values: Iterable[str], setting: str) -> tuple[Network, ...]:
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{setting}: {value!r} is not a network like 10.0.0.0/8") from None
    return tuple(networks)


def _host_of(origin: str) -> str:
    return (urlsplit(origin if "://" in origin else f"//{origin}").hostname or "").lower()


def own_addresses() -> frozenset[Address]:
    """This machine's addresses as its own name resolves (loopback is judged separately)."""
    found: set[Address] = set()
    for name in (socket.gethostname(),):
        found.update(resolved(name, 0, timeout=SAVE_RESOLVE_S))
    return frozenset(found)


@lru_cache(maxsize=8)
def _policy(port: int, names: tuple[str, ...], deny: tuple[str, ...], allow: tuple[str, ...]) -> Policy:
    return Policy(
        console_port=port,
        console_names=frozenset(n for n in names if n and n not in _LOOPBACK_NAMES and not _is_loopback(n)),
        own_addresses=own_addresses(),
        deny=_networks(deny, "PROBE_DENY_NETWORKS"),
        allow=_networks(allow, "PROBE_ALLOW_NETWORKS"),
    )


def _is_loopback(name: str) -> bool:
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def policy() -> Policy:
    """The policy for the current settings (cached per settings' values)."""
    from django.conf import settings

    names = [h.lstrip(".").lower() for h in settings.ALLOWED_HOSTS if h not in ("*",)]
    names += [_host_of(origin) for origin in getattr(settings, "CSRF_TRUSTED_ORIGINS", [])]
    return _policy(
        settings.PORT,
        tuple(sorted(set(names))),
        tuple(getattr(settings, "PROBE_DENY_NETWORKS", ())),
        tuple(getattr(settings, "PROBE_ALLOW_NETWORKS", ())),
    )


def refusal(url: str, *, resolve: bool = False) -> Message | None:
    """Why `url` may not be probed, or None."""
    try:
        policy().check_url(url, resolve=resolve)
    except TargetRefused as exc:
        return exc.message
    return None
