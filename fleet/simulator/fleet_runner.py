"""Many simulated instances in one asyncio loop, and a thread to run them in for tests.

Each instance has its own aiohttp AppRunner and listening socket; one shared ticker task
drives every engine (not a task per instance), so a thousand instances start in seconds
and idle cheaply. An optional control port (control_routes.py) serves every instance's
/_sim routes, so an instance that crashed or refuses connections can still be inspected and
restarted. Gateways (gateway.py: nginx-like reverse proxies in front of some instances)
start after the instances and stop before them.

    async:   runner = FleetRunner(control_port=None); await runner.start(specs, gateways=()); ...
             await runner.stop()
    threads: with SimulatorThread(specs) as sim:
                 httpx.get(sim.url("vllm-a") + "/health")
                 sim.inject("vllm-a", {"kind": "hang", "duration_s": 2})
                 sim.state("vllm-a")["scheduler"]["waiting"]
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from aiohttp import web

from fleet.simulator.control_routes import control_app
from fleet.simulator.faults import FaultKind
from fleet.simulator.gateway import GatewaySpec, SimGateway, add_gateway_routes, resolve_upstreams
from fleet.simulator.instance import SimInstance, listening_socket
from fleet.simulator.scenario_player import play
from fleet.simulator.spec import InstanceSpec

logger = logging.getLogger(__name__)
START_BATCH = 200  # instances brought up concurrently


def default_tick_s(count: int) -> float:
    """Finer ticks for small fleets (smoother streams), coarser for large ones (less CPU)."""
    if count <= 50:
        return 0.01
    return 0.05 if count <= 500 else 0.1


class FleetRunner:
    def __init__(
        self,
        *,
        tick_s: float | None = None,
        on_crash: Callable[[SimInstance], None] | None = None,
        control_port: int | None = None,
        control_host: str = "127.0.0.1",
    ) -> None:
        self.tick_s = tick_s
        self.instances: dict[str, SimInstance] = {}
        self.gateways: dict[str, SimGateway] = {}
        self.control_port = control_port
        self.control_host = control_host
        self._on_crash = on_crash
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._control: web.AppRunner | None = None

    async def start(self, specs: Sequence[InstanceSpec], gateways: Sequence[GatewaySpec] = ()) -> None:
        _check_unique(specs)
        _check_gateways(gateways, specs)
        raise_open_file_limit(needed=len(specs) * 4 + len(gateways) * 64 + 256)
        loop = asyncio.get_running_loop()
        for spec in specs:
            self.instances[spec.name] = SimInstance(
                spec, clock=loop.time, spawn=self.spawn, on_crash=self._crashed
            )
        try:
            items = list(self.instances.values())
            for i in range(0, len(items), START_BATCH):
                await asyncio.gather(*(_listen(inst) for inst in items[i : i + START_BATCH]))
            await self._start_gateways(gateways)
            if self.control_port is not None:
                await self._start_control()
        except BaseException:
            await self.stop()
            raise
        self.tick_s = self.tick_s or default_tick_s(len(specs))
        self._ticker = asyncio.create_task(self._tick_forever(), name="fleet-simulator-ticker")

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
            self._ticker = None
        await asyncio.gather(*(gw.unlisten() for gw in self.gateways.values()), return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(inst.unlisten() for inst in self.instances.values()), return_exceptions=True)
        if self._control is not None:
            await self._control.cleanup()
            self._control = None

    async def _start_gateways(self, specs: Sequence[GatewaySpec]) -> None:
        urls = {
            name: f"http://{_url_host(inst.spec.host)}:{inst.port}" for name, inst in self.instances.items()
        }
        for spec in specs:
            gateway = SimGateway(spec, resolve_upstreams(spec, urls))
            try:
                await gateway.listen()
            except OSError as exc:
                raise OSError(
                    f"gateway {spec.name} cannot listen on {spec.host}:{spec.port}: {exc.strerror}"
                ) from exc
            self.gateways[spec.name] = gateway

    def gateway(self, name: str) -> SimGateway:
        try:
            return self.gateways[name]
        except KeyError:
            raise KeyError(f"no simulated gateway {name!r}; running: {', '.join(self.gateways)}") from None

    async def _start_control(self) -> None:
        """The control port (control_routes.py): /_sim for every instance, even a crashed one."""
        app = control_app(self)
        add_gateway_routes(app, self)
        self._control = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.25)
        await self._control.setup()
        try:
            sock = listening_socket(self.control_host, self.control_port)
        except OSError as exc:
            raise OSError(
                f"the control port {self.control_host}:{self.control_port} is taken: {exc.strerror}"
            ) from exc
        await web.SockSite(self._control, sock).start()
        self.control_port = sock.getsockname()[1]

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run a coroutine that stop() waits for (listening changes, scenario players)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def instance(self, name: str) -> SimInstance:
        try:
            return self.instances[name]
        except KeyError:
            raise KeyError(f"no simulated instance {name!r}; running: {', '.join(self.instances)}") from None

    def tick(self, now: float) -> None:
        for inst in self.instances.values():
            try:
                inst.tick(now)
            except Exception:  # one broken instance must not stop the fleet
                logger.exception("simulated instance %s failed a tick", inst.spec.name)

    async def _tick_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self.tick(loop.time())
            await asyncio.sleep(self.tick_s)

    def _crashed(self, inst: SimInstance) -> None:
        if self._on_crash is not None:
            self._on_crash(inst)


async def _listen(inst: SimInstance) -> None:
    try:
        await inst.listen()
    except OSError as exc:
        raise OSError(
            f"{inst.spec.name} cannot listen on {inst.spec.host}:{inst.spec.port}: {exc.strerror}"
        ) from exc


def _check_unique(specs: Sequence[InstanceSpec]) -> None:
    names = [s.name for s in specs]
    ports = [s.port for s in specs if s.port]
    if len(set(names)) != len(names):
        raise ValueError(f"instance names must be unique: {sorted({n for n in names if names.count(n) > 1})}")
    if len(set(ports)) != len(ports):
        raise ValueError(f"ports must be unique: {sorted({p for p in ports if ports.count(p) > 1})}")


def _check_gateways(gateways: Sequence[GatewaySpec], specs: Sequence[InstanceSpec]) -> None:
    names = [g.name for g in gateways]
    if len(set(names)) != len(names):
        raise ValueError(f"gateway names must be unique: {sorted({n for n in names if names.count(n) > 1})}")
    taken = {s.port for s in specs if s.port}
    ports = [g.port for g in gateways if g.port]
    clashes = sorted({p for p in ports if ports.count(p) > 1 or p in taken})
    if clashes:
        raise ValueError(f"gateway ports must differ from each other and from the instances': {clashes}")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def raise_open_file_limit(*, needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class SimulatorThread:
    """A FleetRunner in a daemon thread with its own loop; a context manager.

    Entering waits until every port accepts connections; leaving stops the instances and
    closes the loop. Methods that touch instances run in the loop's thread.
    """

    def __init__(
        self,
        specs: Sequence[InstanceSpec],
        *,
        gateways: Sequence[GatewaySpec] = (),
        tick_s: float | None = None,
        scenario: Any = None,
        control_port: int | None = None,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.specs = list(specs)
        self.gateway_specs = list(gateways)
        self.runner = FleetRunner(tick_s=tick_s, control_port=control_port)
        self.scenario = scenario
        self.start_timeout_s = start_timeout_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stopping: asyncio.Event | None = None

    def __enter__(self) -> SimulatorThread:
        self._thread = threading.Thread(target=self._run, name="fleet-simulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.start_timeout_s):
            raise TimeoutError(f"the simulator did not start within {self.start_timeout_s} s")
        if self._error is not None:
            self._thread.join()
            raise self._error
        self._wait_until_ports_accept()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.loop is not None and self._stopping is not None and self._thread and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(timeout=30)

    def _run(self) -> None:
        loop = self.loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # reported to __enter__
            self._error = exc
            self._ready.set()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        await self.runner.start(self.specs, self.gateway_specs)
        if self.scenario is not None:
            self.runner.spawn(play(self.scenario, self.runner))
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await self.runner.stop()
            await _cancel_leftover_tasks()

    def _wait_until_ports_accept(self) -> None:
        for inst in self.runner.instances.values():
            with socket.create_connection((inst.spec.host, inst.port), timeout=5):
                pass
        for gateway in self.runner.gateways.values():
            with socket.create_connection((gateway.spec.host, gateway.port), timeout=5):
                pass

    # -- thread-safe access ----------------------------------------------------------------

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run fn(*args, **kwargs) in the loop's thread and return its result."""

        async def run() -> Any:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=30)

    def port(self, name: str) -> int:
        return self.runner.instance(name).port

    @property
    def control_url(self) -> str:
        return f"http://{self.runner.control_host}:{self.runner.control_port}"

    def url(self, name: str) -> str:
        inst = self.runner.instance(name)
        return f"http://{inst.spec.host}:{inst.port}"

    def gateway_url(self, name: str) -> str:
        return self.runner.gateway(name).url

    def set_gateway(self, name: str, **knobs: Any) -> dict[str, Any]:
        """Change a gateway's added_latency_s / read_timeout_s (GatewayError on bad input)."""
        gateway = self.runner.gateway(name)
        return self.call(gateway.set_knobs, knobs)

    def state(self, name: str) -> dict[str, Any]:
        return self.call(lambda: self.runner.instance(name).state())

    def inject(self, name: str, fault: dict[str, Any]) -> dict[str, Any]:
        """Activate a fault (FaultError on bad input); returns it as /_sim/faults would."""
        inst = self.runner.instance(name)
        return self.call(lambda: inst.apply_fault(fault).to_dict(now=inst.clock()))

    def clear(self, name: str, kind: str | None = None) -> None:
        inst = self.runner.instance(name)
        self.call(inst.clear_faults, FaultKind(kind) if kind else None)

    def wait_listening(self, name: str, listening: bool = True, timeout_s: float = 5.0) -> None:
        """Block until the instance's port is open (or closed)."""
        import time

        deadline = time.monotonic() + timeout_s
        while self.call(lambda: self.runner.instance(name).listening) != listening:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not {'open' if listening else 'close'} its port")
            time.sleep(0.01)


async def _cancel_leftover_tasks() -> None:
    current = asyncio.current_task()
    leftovers = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    for task in leftovers:
        task.cancel()
    await asyncio.gather(*leftovers, return_exceptions=True)
