"""Connections a probe may make: the target policy checked on the address connected to.

httpx resolves a host name when it connects, after any check made when the URL was saved,
and DNS can change in between. So the probes' clients connect through these httpcore
network backends: they resolve the name themselves, refuse (fleet.target_policy) when any
address it resolves to is refused, and connect to the checked address. TLS still verifies
the name in the URL (httpcore passes it separately as the server name).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore
import httpx

from fleet import target_policy


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
