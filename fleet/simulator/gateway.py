"""A simulated gateway: an nginx-like reverse proxy in front of simulated instances.

The inventory's gateways (fleet.models.Gateway: an nginx, Envoy or Kong URL clients call,
in front of some instances) have nothing to answer on their URL unless something proxies
there; `manage.py simulate --from-inventory` (what `make run` starts) runs one of these for
every gateway whose URL is on loopback, in front of its simulated instances (the demo:
llm-gateway on 127.0.0.1:8080 before the three vLLM instances), so a request timed through
the gateway and straight to the engine differ by what the gateway adds.

What it does, as nginx does with `proxy_pass http://<upstream block>` and
`proxy_buffering off` (nginx's defaults as its proxy and upstream module documentation
gives them):

- every request (method, path and query as received, headers but the hop-by-hop ones, the
  body) goes to the next upstream in turn (round robin, equal weights); Host becomes the
  upstream's address and each upstream connection carries one request (Connection: close),
  as nginx does without `keepalive` in the upstream block;
- the response streams back as it arrives, chunk by chunk (an SSE stream token by token);
  the upstream's Server and Date give way to the gateway's own;
- `added_latency_s` (5 ms unless the spec says otherwise) passes between reading the
  request and connecting upstream: the gateway's own cost, raised to show a slow gateway;
- an upstream that refuses the connection (or times out connecting) is skipped for the
  next one, and so is one that answers 404 when the spec says `next_upstream_on_404`
  (nginx's `proxy_next_upstream error timeout http_404 non_idempotent`; the inventory's
  gateways have it, since the demo's fronts instances of different models); one that
  fails after the request went out is retried elsewhere only for an idempotent method
  (nginx 1.9.13 and later: never for POST). When no upstream answers: 502 Bad Gateway,
  or 504 Gateway Time-out when the last attempt timed out, with nginx's HTML error page;
- `read_timeout_s` (nginx's proxy_read_timeout, 60 s) bounds each wait for the upstream:
  for the response headers (504) and between two reads of the body, where the response
  has begun, so the client connection is cut short (as nginx does);
- a client that goes away cancels the upstream request (the engine aborts it);
- one access line per request, nginx's combined format plus the request time and the
  upstream's address, status and header time, to the logger `fleet.simulator.gateway`
  and to a ring buffer (GET /_sim/gateways/{name}/access_log on the control port).

Not simulated: passive health checks (max_fails/fail_timeout: a down upstream is tried
again on every turn, which on loopback costs a refused connect, well under a millisecond),
request buffering limits (client_max_body_size), TLS, and Envoy's or Kong's own error
bodies and timeouts (every kind behaves as nginx).

Control (FleetRunner's control port, beside the instances' /_sim routes):

GET   /_sim/gateways                        name, kind, URL, upstreams, knobs, counts of each
GET   /_sim/gateways/{name}                 one of them
PATCH /_sim/gateways/{name}                 {"added_latency_s": 0.25, "read_timeout_s": 5}:
                                            either or both; 400 naming the field when bad
GET   /_sim/gateways/{name}/access_log      ?limit=N (default 100) last access lines
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

logger = logging.getLogger(__name__)

DEFAULT_ADDED_LATENCY_S = 0.005
DEFAULT_READ_TIMEOUT_S = 60.0  # nginx's proxy_read_timeout
DEFAULT_CONNECT_TIMEOUT_S = 60.0  # nginx's proxy_connect_timeout
MAX_ADDED_LATENCY_S = 600.0
ACCESS_LOG_LINES = 2000
SHUTDOWN_TIMEOUT_S = 0.25
LOOPBACK = {"127.0.0.1", "localhost", "::1"}

# RFC 9110 section 7.6.1: never forwarded (and whatever the Connection header names).
HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
    )
)
# The proxy sets these itself: Host (the upstream's address), the body's length.
_NOT_FORWARDED_UP = frozenset({"host", "content-length"})
# nginx's proxy_hide_header defaults (Server, Date, X-Pad, X-Accel-*) and what the
# gateway's own response computes (Content-Length is set again when the upstream sent one).
_NOT_FORWARDED_DOWN = frozenset({"server", "date", "x-pad", "content-length"})
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})

_REASONS = {502: "Bad Gateway", 504: "Gateway Time-out"}


class GatewayError(ValueError):
    """A gateway spec or knob is wrong; `field` names what to change."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class GatewaySpec:
    """One simulated gateway. Upstreams are simulated instance names (FleetRunner resolves
    them to their ports once they listen) or base URLs like http://127.0.0.1:8101."""

    name: str
    port: int = 0  # 0: any free port
    upstreams: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    kind: str = "nginx"
    added_latency_s: float = DEFAULT_ADDED_LATENCY_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    # nginx's `proxy_next_upstream error timeout http_404 non_idempotent`: an upstream that
    # answers 404 (a model it does not serve) gives way to the next one, POST included.
    next_upstream_on_404: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "upstreams", tuple(self.upstreams))
        if not self.name:
            raise GatewayError("a gateway needs a name", field="name")
        if not self.upstreams:
            raise GatewayError(f"gateway {self.name}: no upstream", field="upstreams")
        _check_latency(self.added_latency_s)
        _check_timeout(self.read_timeout_s, "read_timeout_s")
        _check_timeout(self.connect_timeout_s, "connect_timeout_s")


def _check_latency(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_ADDED_LATENCY_S:
        raise GatewayError(
            f"added_latency_s must be a number of seconds from 0 to {MAX_ADDED_LATENCY_S:g}",
            field="added_latency_s",
        )
    return float(value)


def _check_timeout(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86400:
        raise GatewayError(f"{name} must be a number of seconds above 0", field=name)
    return float(value)


@dataclass
class _Attempt:
    addr: str
    status: str = "-"
    header_time: float | None = None


@dataclass
class _Outcome:
    status: int = 0
    size: int = 0
    attempts: list[_Attempt] = field(default_factory=list)


class SimGateway:
    """A listening gateway. `added_latency_s` and `read_timeout_s` may change while it runs."""

    def __init__(self, spec: GatewaySpec, upstream_urls: Sequence[str]) -> None:
        if not upstream_urls:
            raise GatewayError(f"gateway {spec.name}: no upstream", field="upstreams")
        self.spec = spec
        self.upstream_urls = [url.rstrip("/") for url in upstream_urls]
        self.port = spec.port
        self.added_latency_s = spec.added_latency_s
        self.read_timeout_s = spec.read_timeout_s
        self.requests: Counter[str] = Counter()  # per upstream URL, each attempt
        self.statuses: Counter[int] = Counter()  # what clients got
        self.access_log: deque[str] = deque(maxlen=ACCESS_LOG_LINES)
        self._next = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        host = f"[{self.spec.host}]" if ":" in self.spec.host else self.spec.host
        return f"http://{host}:{self.port}"

    @property
    def listening(self) -> bool:
        return self._runner is not None

    async def listen(self) -> None:
        from fleet.simulator.instance import listening_socket

        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(force_close=True, limit=0),
            auto_decompress=False,  # bytes pass through as sent, Content-Encoding and all
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            trust_env=False,
        )
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._proxy)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
            handler_cancellation=True,
        )
        await runner.setup()
        try:
            sock = listening_socket(self.spec.host, self.port)
        except BaseException:
            await runner.cleanup()
            await self._session.close()
            raise
        await web.SockSite(runner, sock).start()
        self.port = sock.getsockname()[1]
        self._runner = runner

    async def unlisten(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def set_knobs(self, data: Any) -> dict[str, Any]:
        """Apply {"added_latency_s": ..., "read_timeout_s": ...} (either); GatewayError if bad."""
        if not isinstance(data, dict) or not data:
            raise GatewayError('send a JSON object like {"added_latency_s": 0.25}')
        unknown = sorted(set(data) - {"added_latency_s", "read_timeout_s"})
        if unknown:
            raise GatewayError(
                f"unknown field {unknown[0]!r}; the knobs are added_latency_s and read_timeout_s",
                field=unknown[0],
            )
        latency = _check_latency(data["added_latency_s"]) if "added_latency_s" in data else None
        timeout = (
            _check_timeout(data["read_timeout_s"], "read_timeout_s") if "read_timeout_s" in data else None
        )
        if latency is not None:
            self.added_latency_s = latency
        if timeout is not None:
            self.read_timeout_s = timeout
        return self.state()

    def state(self) -> dict[str, Any]:
        return {
            "name": self.spec.name,
            "kind": self.spec.kind,
            "url": self.url,
            "listening": self.listening,
            "upstreams": list(self.upstream_urls),
            "added_latency_s": self.added_latency_s,
            "read_timeout_s": self.read_timeout_s,
            "connect_timeout_s": self.spec.connect_timeout_s,
            "requests_per_upstream": {url: self.requests[url] for url in self.upstream_urls},
            "responses_per_status": {str(k): v for k, v in sorted(self.statuses.items())},
        }

    def access_log_lines(self, *, limit: int) -> list[str]:
        return list(self.access_log)[-limit:] if limit > 0 else []

    # -- proxying --------------------------------------------------------------------------

    def _turns(self) -> list[str]:
        """Every upstream once, starting at the next one in the round."""
        count = len(self.upstream_urls)
        start = self._next % count
        self._next = (start + 1) % count
        return [self.upstream_urls[(start + i) % count] for i in range(count)]

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        outcome = _Outcome()
        try:
            return await self._forward(request, outcome)
        except asyncio.CancelledError:
            outcome.status = 499  # the client closed the connection (nginx's code for it)
            raise
        except web.HTTPException as exc:  # a body over client_max_size: 413
            outcome.status = exc.status
            raise
        finally:
            self._log(request, outcome, time.monotonic() - started)

    async def _forward(self, request: web.Request, outcome: _Outcome) -> web.StreamResponse:
        body = await request.read()  # nginx reads the whole request body first
        if self.added_latency_s > 0:
            await asyncio.sleep(self.added_latency_s)
        headers = _upstream_headers(request.headers)
        idempotent = request.method in IDEMPOTENT
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.spec.connect_timeout_s, sock_read=self.read_timeout_s
        )
        failed = 502
        turns = self._turns()
        for base in turns:
            attempt = _Attempt(addr=_addr(base))
            outcome.attempts.append(attempt)
            self.requests[base] += 1
            sent_at = time.monotonic()
            try:
                upstream = await self._session.request(
                    request.method,
                    _target(base, request.raw_path),
                    headers=headers,
                    data=body if body or request.method not in IDEMPOTENT else None,
                    allow_redirects=False,
                    timeout=timeout,
                )
            except aiohttp.ConnectionTimeoutError:  # connecting: the request never left
                attempt.status, failed = "504", 504
                continue
            except aiohttp.ServerTimeoutError:  # no response headers within read_timeout_s
                attempt.status, failed = "504", 504
                if idempotent:
                    continue
                break
            except aiohttp.ClientConnectorError:  # refused, unreachable: the request never left
                attempt.status, failed = "502", 502
                continue
            except (aiohttp.ClientError, OSError):  # closed or reset after the request went out
                attempt.status, failed = "502", 502
                if idempotent:
                    continue
                break
            attempt.status = str(upstream.status)
            attempt.header_time = time.monotonic() - sent_at
            if upstream.status == 404 and self.spec.next_upstream_on_404 and base != turns[-1]:
                upstream.release()
                continue
            return await self._relay(request, upstream, outcome)
        outcome.status = failed
        response = _error_page(failed)
        outcome.size = len(response.body)
        return response

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, outcome: _Outcome
    ) -> web.StreamResponse:
        try:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in _downstream_headers(upstream.headers):
                response.headers.add(name, value)
            response.headers["Server"] = "nginx"
            length = upstream.headers.get("Content-Length")
            if length is not None and length.isdigit():
                response.content_length = int(length)
            outcome.status = upstream.status
            await response.prepare(request)
            if request.method == "HEAD":
                await response.write_eof()
                return response
            try:
                async for chunk in upstream.content.iter_any():  # as it arrives: unbuffered
                    await response.write(chunk)
                    outcome.size += len(chunk)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                # Upstream timed out or went away mid-body: nginx closes the client
                # connection, so the client sees a cut-short response, not a complete one.
                logger.warning(
                    "%s: upstream %s failed while reading the response body: %s",
                    self.spec.name,
                    outcome.attempts[-1].addr,
                    type(exc).__name__,
                )
                if request.transport is not None:
                    request.transport.abort()
                return response
            await response.write_eof()
            return response
        finally:
            upstream.close()

    def _log(self, request: web.Request, outcome: _Outcome, elapsed: float) -> None:
        status = outcome.status or 500
        self.statuses[status] += 1
        stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime())
        version = f"HTTP/{request.version.major}.{request.version.minor}"
        referer = request.headers.get("Referer", "-")
        agent = request.headers.get("User-Agent", "-")
        attempts = outcome.attempts
        addrs = ", ".join(a.addr for a in attempts) or "-"
        statuses = ", ".join(a.status for a in attempts) or "-"
        header_times = ", ".join("-" if a.header_time is None else f"{a.header_time:.3f}" for a in attempts)
        line = (
            f'{request.remote or "-"} - - [{stamp}] "{request.method} {request.raw_path} {version}" '
            f'{status} {outcome.size} "{referer}" "{agent}" rt={elapsed:.3f} '
            f'ua="{addrs}" us="{statuses}" uht="{header_times or "-"}"'
        )
        self.access_log.append(line)
        logger.info("%s %s", self.spec.name, line)


def _upstream_headers(incoming: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    named = _connection_tokens(incoming)
    headers: CIMultiDict[str] = CIMultiDict()
    for name, value in incoming.items():
        lower = name.lower()
        if lower in HOP_BY_HOP or lower in _NOT_FORWARDED_UP or lower in named:
            continue
        headers.add(name, value)
    headers["Connection"] = "close"
    return headers


def _downstream_headers(incoming: CIMultiDictProxy[str]) -> Iterable[tuple[str, str]]:
    named = _connection_tokens(incoming)
    for name, value in incoming.items():
        lower = name.lower()
        if lower in HOP_BY_HOP or lower in _NOT_FORWARDED_DOWN or lower in named:
            continue
        yield name, value


def _connection_tokens(headers: CIMultiDictProxy[str]) -> set[str]:
    return {
        token.strip().lower() for value in headers.getall("Connection", ()) for token in value.split(",")
    } - {""}


def _target(base: str, raw_path: str) -> Any:
    from yarl import URL

    return URL(base + raw_path, encoded=True)


def _addr(base: str) -> str:
    return urlsplit(base).netloc or base


def _error_page(status: int) -> web.Response:
    """nginx's built-in error page (ngx_http_special_response.c), as it sends it."""
    title = f"{status} {_REASONS[status]}"
    body = (
        f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n"
        f"<center><h1>{title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    )
    return web.Response(
        status=status,
        reason=_REASONS[status],
        body=body.encode(),
        headers={"Content-Type": "text/html", "Server": "nginx"},
    )


# -- where gateways come from ----------------------------------------------------------------


def resolve_upstreams(spec: GatewaySpec, instance_urls: dict[str, str]) -> list[str]:
    """The base URLs a spec's upstreams name: an instance name's URL, or the URL itself."""
    urls = []
    for upstream in spec.upstreams:
        if upstream.startswith(("http://", "https://")):
            urls.append(upstream)
        elif upstream in instance_urls:
            urls.append(instance_urls[upstream])
        else:
            raise GatewayError(
                f"gateway {spec.name}: no simulated instance {upstream!r} to proxy to", field="upstreams"
            )
    return urls


def gateway_specs_from_inventory(instance_names: Iterable[str]) -> tuple[list[GatewaySpec], list[str]]:
    """Specs for the inventory's gateways on loopback (http), in front of the simulated
    instances they name; and a note for each loopback gateway left out (and why)."""
    from fleet.models import Gateway  # Django is only needed for this source of specs

    simulated = set(instance_names)
    specs: list[GatewaySpec] = []
    notes: list[str] = []
    for row in Gateway.objects.prefetch_related("instances").order_by("name"):
        parts = urlsplit(row.url)
        if parts.hostname not in LOOPBACK:
            continue
        if parts.scheme != "http":
            notes.append(f"gateway {row.name} not simulated: {row.url} is not plain http")
            continue
        names = sorted(i.name for i in row.instances.all() if i.name in simulated)
        if not names:
            notes.append(f"gateway {row.name} not simulated: none of its instances is simulated")
            continue
        host = "::1" if parts.hostname == "::1" else "127.0.0.1"
        # In front of instances that serve different models, as the demo's gateway is, a
        # request finds the one serving its model (next_upstream_on_404), as an nginx set up
        # with `proxy_next_upstream ... http_404 non_idempotent` would.
        specs.append(
            GatewaySpec(
                name=row.name,
                port=parts.port or 80,
                upstreams=tuple(names),
                host=host,
                kind=row.kind,
                next_upstream_on_404=True,
            )
        )
    return specs, notes


# -- control routes (added to FleetRunner's control app) -------------------------------------

GATEWAYS_KEY: web.AppKey[Any] = web.AppKey("gateway_runner")


def add_gateway_routes(app: web.Application, runner: Any) -> None:
    """GET/PATCH /_sim/gateways... on the control port; runner.gateways maps name -> SimGateway."""
    app[GATEWAYS_KEY] = runner
    app.add_routes([
        web.get("/_sim/gateways", _list_gateways),
        web.get("/_sim/gateways/{name}", _gateway_state),
        web.patch("/_sim/gateways/{name}", _set_gateway),
        web.get("/_sim/gateways/{name}/access_log", _gateway_access_log),
    ])  # fmt: skip


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, indent=1))


def _gateway(request: web.Request) -> SimGateway:
    name = request.match_info["name"]
    gateways = request.app[GATEWAYS_KEY].gateways
    if name not in gateways:
        error = f"no simulated gateway {name!r}; GET /_sim/gateways lists them"
        raise web.HTTPNotFound(text=json.dumps({"error": error}), content_type="application/json")
    return gateways[name]


async def _list_gateways(request: web.Request) -> web.Response:
    return _json({"gateways": [gw.state() for gw in request.app[GATEWAYS_KEY].gateways.values()]})


async def _gateway_state(request: web.Request) -> web.Response:
    return _json(_gateway(request).state())


async def _set_gateway(request: web.Request) -> web.Response:
    gateway = _gateway(request)
    try:
        data = await request.json()
    except ValueError:
        return _json({"error": "the body must be JSON", "field": ""}, status=400)
    try:
        return _json(gateway.set_knobs(data))
    except GatewayError as exc:
        return _json({"error": str(exc), "field": exc.field}, status=400)


async def _gateway_access_log(request: web.Request) -> web.Response:
    try:
        limit = int(request.query.get("limit", "100"))
    except ValueError:
        return _json({"error": "limit must be a whole number", "field": "limit"}, status=400)
    return _json({"lines": _gateway(request).access_log_lines(limit=limit)})
