"""The HTTP clients and /metrics parsers the prober could use, measured on the same work.

Fetch: the /metrics page of every simulated instance that has one (900 of 1,000), at most
`concurrency` at once, through each candidate; wall time and the process's CPU time
(user + system, resource.getrusage) for the whole batch, best of `repeat`:

- httpx, one shared AsyncClient (the bare fetch of benchmarks.probe_cycle);
- httpx, a client per instance (how the prober fetched before this client);
- aiohttp, one ClientSession (its HTTP parser is C);
- the prober's client (fleet.probes.http_client: asyncio Protocol + httptools' C
  parser), a client per instance, as a sweep uses it;
- an asyncio Protocol + h11 (pure Python parser) minimal client;
- pycurl's CurlMulti (libcurl), driven by its own select loop in this thread (no asyncio
  glue: the floor of a compiled client), when pycurl is installed.

Parse: the same pages, fetched once, read by prometheus_client's parser (the whole page;
the relevant lines only, as the prober did) and by the prober's own reader
(fleet.probes.exposition.read_samples, the families in fleet.probes.metric_names only);
CPU per page.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from io import BytesIO

import h11
import httpx

from benchmarks import services
from benchmarks.probe_cycle import _start_simulator


def _measured(fn: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), services.cpu_s()
    fn()
    return time.perf_counter() - wall, services.cpu_s() - cpu


async def _bounded(urls: list[str], concurrency: int, get: Callable) -> None:
    semaphore = asyncio.Semaphore(concurrency)

    async def one(url: str) -> None:
        async with semaphore:
            body = await get(url)
            assert body, url

    await asyncio.gather(*(one(u) for u in urls))


async def _httpx_shared(urls: list[str], concurrency: int) -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=10, trust_env=False) as client:
        await _bounded(urls, concurrency, lambda u: _httpx_get(client, u))


async def _httpx_get(client: httpx.AsyncClient, url: str) -> bytes:
    return (await client.get(url)).content


async def _httpx_per_instance(urls: list[str], concurrency: int) -> None:
    from fleet.probes.fetch import _tls_context

    async def get(url: str) -> bytes:
        # The prober shared one TLS context: building one per client loads the CA bundle.
        limits = httpx.Limits(max_connections=6, max_keepalive_connections=6)
        async with httpx.AsyncClient(
            limits=limits, timeout=10, trust_env=False, verify=_tls_context()
        ) as client:
            return (await client.get(url)).content

    await _bounded(urls, concurrency, get)


async def _aiohttp(urls: list[str], concurrency: int) -> None:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:

        async def get(url: str) -> bytes:
            async with session.get(url) as response:
                return await response.read()

        await _bounded(urls, concurrency, get)


async def _probe_client(urls: list[str], concurrency: int) -> None:
    from fleet.probes.fetch import make_instance_client
    from fleet.probes.target import ProbeLimits

    limits = ProbeLimits()

    async def get(url: str) -> bytes:
        async with make_instance_client(limits=limits) as client:
            answer = await client.request(
                "GET", url, max_bytes=limits.max_body_bytes, prefix_bytes=65536, trace=lambda _: None
            )
            return answer.body

    await _bounded(urls, concurrency, get)


class _H11Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.connection = h11.Connection(h11.CLIENT)
        self.body: list[bytes] = []
        self.done: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.connection.receive_data(data)
        while True:
            event = self.connection.next_event()
            if isinstance(event, h11.Data):
                self.body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self.done.set_result(b"".join(self.body))
                return
            elif event is h11.NEED_DATA:
                return

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(exc or ConnectionError("closed"))


async def _h11(urls: list[str], concurrency: int) -> None:
    loop = asyncio.get_running_loop()

    async def get(url: str) -> bytes:
        parsed = httpx.URL(url)
        transport, protocol = await loop.create_connection(_H11Protocol, parsed.host, parsed.port)
        try:
            request = h11.Request(
                method="GET", target=parsed.raw_path, headers=[("Host", parsed.netloc.decode())]
            )
            transport.write(protocol.connection.send(request) + protocol.connection.send(h11.EndOfMessage()))
            return await protocol.done
        finally:
            transport.close()

    await _bounded(urls, concurrency, get)


def _pycurl(urls: list[str], concurrency: int) -> None:
    import pycurl

    multi, pending, free = pycurl.CurlMulti(), list(reversed(urls)), []
    for _ in range(concurrency):
        free.append(pycurl.Curl())
    active = 0
    while pending or active:
        while pending and free:
            handle, buffer = free.pop(), BytesIO()
            handle.setopt(pycurl.URL, pending.pop())
            handle.setopt(pycurl.WRITEDATA, buffer)
            handle.setopt(pycurl.FORBID_REUSE, 1)
            multi.add_handle(handle)
            active += 1
        while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        _, done, failed = multi.info_read()
        for handle in done + [f[0] for f in failed]:
            multi.remove_handle(handle)
            free.append(handle)
            active -= 1
        multi.select(0.1)


def _candidates() -> list[tuple[str, Callable[[list[str], int], None]]]:
    found: list[tuple[str, Callable[[list[str], int], None]]] = [
        ("httpx, one shared client", lambda u, c: asyncio.run(_httpx_shared(u, c))),
        ("httpx, a client per instance", lambda u, c: asyncio.run(_httpx_per_instance(u, c))),
        ("aiohttp, one session", lambda u, c: asyncio.run(_aiohttp(u, c))),
        ("prober's client (asyncio + httptools)", lambda u, c: asyncio.run(_probe_client(u, c))),
        ("asyncio + h11", lambda u, c: asyncio.run(_h11(u, c))),
    ]
    try:
        import pycurl  # noqa: F401
    except ImportError:
        print("  (pycurl is not installed: its CurlMulti is left out)")
    else:
        found.append(("pycurl CurlMulti (own select loop)", _pycurl))
    return found


def _parsers() -> list[tuple[str, Callable[[str], object]]]:
    from prometheus_client.parser import text_string_to_metric_families

    from fleet.probes.exposition import read_samples, samples_by_prometheus_client
    from fleet.probes.scrape import parse_exposition

    def whole_page(text: str) -> object:
        return [s for f in text_string_to_metric_families(text) for s in f.samples]

    return [
        ("prometheus_client, whole page", whole_page),
        ("prometheus_client, relevant lines (before)", samples_by_prometheus_client),
        ("own reader, wanted families (now)", lambda t: read_samples(t)),
        (
            "parse_exposition (reader + canonical names)",
            lambda t: parse_exposition(t, engine="vllm", timestamp=0),
        ),
    ]


def _pages(urls: list[str]) -> list[str]:
    with httpx.Client(timeout=10, trust_env=False) as client:
        return [client.get(u).text for u in urls]


def run(*, instances: int, base_port: int, concurrency: int, repeat: int) -> int:
    from benchmarks.probe_cycle import _has_metrics
    from fleet.simulator.spec import specs_for

    urls = [
        f"http://127.0.0.1:{s.port}/metrics"
        for s in specs_for(instances, base_port)
        if _has_metrics(s.engine)
    ]
    print(
        f"HTTP clients and parsers: {len(urls)} /metrics pages, concurrency {concurrency}, best of {repeat}"
    )
    simulator = _start_simulator(instances=instances, base_port=base_port)
    try:
        for name, fetch in _candidates():
            runs = [_measured(lambda f=fetch: f(urls, concurrency)) for _ in range(repeat)]
            wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
            print(
                f"  fetch  {name:44s} wall {wall:5.2f} s  CPU {cpu:5.2f} s  "
                f"({cpu / len(urls) * 1e3:.2f} ms per fetch)"
            )
        pages = _pages(urls)
        for name, parse in _parsers():
            cpu = min(_measured(lambda p=parse: [p(t) for t in pages])[1] for _ in range(repeat))
            print(f"  parse  {name:44s} CPU {cpu:5.2f} s  ({cpu / len(pages) * 1e3:.2f} ms per page)")
    finally:
        services.stop(simulator)
    return 0
