"""Connections a probe may make: the target policy checked on the address connected to.

A client resolves a host name when it connects, after any check made when the URL was
saved, and DNS can change in between. So the probes connect through
`open_checked_connection` (the probes' own client, fleet.probes.http_client) or these
httpcore network backends (the httpx clients of the streaming probe and the DCGM reader):
they resolve the name themselves, refuse (fleet.target_policy) when any address it
resolves to is refused, and connect to the checked address. TLS still verifies the name in
the URL (it is passed separately as the server name).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import anyio
import httpcore
import httpx

from fleet import target_policy


@lru_cache(maxsize=4096)
def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class RefusedByPolicy(httpcore.ConnectError):
    """The target policy refused the address: no connection was made. httpx hands it on as
    an httpx.ConnectError with this message, so every caller reports it as a failed
    connection that says why."""


def _refused(exc: target_policy.TargetRefused) -> RefusedByPolicy:
    return RefusedByPolicy(f"refused by the probe target policy: {exc}")


def _checked(host: str, port: int, addresses: Iterable[str]) -> list[str]:
    """The addresses to connect to, each allowed by the policy (a name is checked too);
    RefusedByPolicy when any is not, or when a name resolved to none."""
    policy = target_policy.policy()
    found = list(dict.fromkeys(addresses))
    try:
        if not _literal(host):
            policy.check_name(host)
        for address in found:
            policy.check_address(address, port)
    except target_policy.TargetRefused as exc:
        raise _refused(exc) from exc
    if not found:
        raise httpcore.ConnectError(f"{host} does not resolve")
    return found


class GuardedAsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        found = [host] if _literal(host) else await self._resolve(host, port, timeout)
        addresses = _checked(host, port, found)
        error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        raise error  # type: ignore[misc]  (addresses is never empty: _checked says so)

    @staticmethod
    async def _resolve(host: str, port: int, timeout: float | None) -> list[str]:
        try:
            with anyio.fail_after(timeout):
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} took over {timeout:g} s") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return [str(info[4][0]) for info in infos]

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("probes connect over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedSyncBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        found = [host] if _literal(host) else map(str, target_policy.resolved(host, port, timeout=timeout))
        addresses = _checked(host, port, found)
        error: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        raise error  # type: ignore[misc]  (addresses is never empty: _checked says so)

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("probes connect over TCP only")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def guarded(client: httpx.AsyncClient | httpx.Client) -> httpx.AsyncClient | httpx.Client:
    """`client` with its transport's connections going through the guarded backend.

    httpx does not take a network backend; its transport's httpcore pool does, and hands it
    to every connection it opens, so it is set on the pool (httpcore 1.x: `_network_backend`;
    tests/probes/test_guarded_network.py fails if that ever changes)."""
    pool = client._transport._pool  # type: ignore[union-attr]
    pool._network_backend = (
        GuardedAsyncBackend() if isinstance(client, httpx.AsyncClient) else GuardedSyncBackend()
    )
    return client


async def _resolve_for_connect(host: str, port: int, timeout_s: float) -> list[str]:
    try:
        async with asyncio.timeout(timeout_s):
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError:
        raise httpx.ConnectTimeout(f"resolving {host} took over {timeout_s:g} s") from None
    except OSError as exc:
        raise httpx.ConnectError(str(exc)) from exc
    return [str(info[4][0]) for info in infos]


def _connect_error(exc: OSError, address: str, port: int) -> httpx.ConnectError:
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    error = httpx.ConnectError(f"{reason} (connecting to {address} port {port})")
    error.__cause__ = exc
    return error


async def open_checked_connection(
    factory: Callable[[], asyncio.Protocol], host: str, port: int, *, timeout_s: float
) -> tuple[asyncio.Transport, Any]:
    """An asyncio connection to an address of `host` the target policy allows, tried in
    the resolver's order, each attempt within timeout_s. Failures are httpx's exceptions
    (ConnectError, with the OS error as its cause; ConnectTimeout); a refused target is a
    ConnectError that says why, and nothing is connected."""
    found = [host] if _literal(host) else await _resolve_for_connect(host, port, timeout_s)
    try:
        addresses = _checked(host, port, found)
    except httpcore.ConnectError as exc:
        raise httpx.ConnectError(str(exc)) from exc
    loop = asyncio.get_running_loop()
    error: Exception | None = None
    for address in addresses:
        try:
            async with asyncio.timeout(timeout_s):
                return await loop.create_connection(factory, address, port)  # type: ignore[return-value]
        except TimeoutError:
            error = httpx.ConnectTimeout(f"connecting to {address} port {port} took over {timeout_s:g} s")
        except OSError as exc:
            error = _connect_error(exc, address, port)
    raise error  # type: ignore[misc]  (addresses is never empty: _checked says so)
