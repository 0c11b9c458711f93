"""One simulated instance: an engine, its background traffic, its faults, its port.

The fleet runner owns the event loop and calls `tick(now)` for every instance from one
shared ticker. Listening follows the faults: the port is open unless the instance has
crashed or refuses connections; a crash fails every request in the engine, records the
exit code, and a restart (the crash fault cleared or expired) brings up a fresh engine
with zeroed counters, as a restarted process would have.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web

from fleet.simulator import vllm_versions
from fleet.simulator.engine import Engine, EngineRequest, RequestState
from fleet.simulator.engine_effects import apply_engine_effects
from fleet.simulator.engine_stats import EngineStats
from fleet.simulator.faults import Fault, FaultBook, FaultKind, check_gpus, parse_fault
from fleet.simulator.generation import Generation
from fleet.simulator.histograms import ITERATION_TOKENS, ITERATION_TOKENS_0_8
from fleet.simulator.http_app import EngineServer, build_app
from fleet.simulator.instance_state import instance_state
from fleet.simulator.metrics_faults import huge_metrics, malformed_metrics
from fleet.simulator.nvml_readings import GpuLoad, gpu_indices, nvml_reading
from fleet.simulator.ollama_server import OllamaServer
from fleet.simulator.sglang_metrics import sglang_buckets
from fleet.simulator.sglang_server import SglangServer
from fleet.simulator.spec import InstanceSpec, LoadProfile
from fleet.simulator.spec_mapping import load_profile_from_mapping
from fleet.simulator.tgi_metrics import tgi_buckets
from fleet.simulator.tgi_server import TgiServer
from fleet.simulator.timing import perf_model_for
from fleet.simulator.traffic import Traffic
from fleet.simulator.vllm_server import VllmServer

SERVERS: dict[str, type[EngineServer]] = {
    "vllm": VllmServer,
    "tgi": TgiServer,
    "ollama": OllamaServer,
    "sglang": SglangServer,
}
SHUTDOWN_TIMEOUT_S = 0.25  # in-flight handlers get this long before they are cancelled
GO_DOWN_DELAY_S = 0.05  # lets the response to the POST that crashed us leave first
ACCESS_LOG_LINES = 2000
# How a background request ends up in the access log: 499 when its client gave up first
# (nginx's "client closed request"), 500 when the engine died under it.
_BACKGROUND_STATUS = {"abort": 499, "error": 500}

Spawn = Callable[[Coroutine[Any, Any, None]], Any]


class SimInstance:
    def __init__(
        self,
        spec: InstanceSpec,
        *,
        clock: Callable[[], float],
        spawn: Spawn,
        on_crash: Callable[[SimInstance], None] | None = None,
    ) -> None:
        self.spec = spec
        self.port = spec.port
        self.clock = clock
        self.server = SERVERS[spec.engine]()
        self.faults = FaultBook()
        self.rng = random.Random(spec.seed)
        self.http_requests: Counter[tuple[str, str, str]] = Counter()
        self.access_log: deque[str] = deque(maxlen=ACCESS_LOG_LINES)
        self.exit_code: int | None = None
        self.oom_killed = False
        self.restarts = 0
        self.last_generation_at: float | None = None
        self._spawn = spawn
        self._on_crash = on_crash
        self._runner: web.AppRunner | None = None
        self._transition = asyncio.Lock()
        self._backlog: list[EngineRequest] = []
        self._boot(streams=[spec.load])

    def _boot(self, *, streams: list[LoadProfile]) -> None:
        now = self.clock()
        self.started_at, self.started_wall = now, time.time()
        self.engine = new_engine(self.spec, now=now)
        self.traffic = Traffic(
            engine=self.engine, max_model_len=self.spec.max_model_len, seed=self.rng.random(), now=now
        )
        self.traffic.on_finish = self._log_background
        for profile in streams:
            self.traffic.set_stream(profile, now=now)
        self._apply_effects()

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def listening(self) -> bool:
        return self._runner is not None

    @property
    def should_listen(self) -> bool:
        return self.exit_code is None and FaultKind.REFUSE_CONNECTIONS not in self.faults

    @property
    def engine_dead(self) -> bool:
        return self.engine.knobs.dead

    async def listen(self) -> None:
        runner = web.AppRunner(
            build_app(self, self.server),
            handle_signals=False,
            access_log=None,
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
            handler_cancellation=True,
        )
        await runner.setup()
        sock = listening_socket(self.spec.host, self.port)
        await web.SockSite(runner, sock).start()
        self.port = sock.getsockname()[1]
        self._runner = runner

    async def unlisten(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def sync_listening(self, *, delay: float = 0.0) -> None:
        async with self._transition:
            if delay:
                await asyncio.sleep(delay)
            if self.should_listen and not self.listening:
                await self.listen()
            elif not self.should_listen and self.listening:
                await self.unlisten()

    # -- time ------------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        if self.faults and self.faults.expire(now):
            self._faults_changed()
        if self.exit_code is not None:
            return  # the process is gone
        if self.listening:
            self.traffic.generate(now)
            if FaultKind.QUEUE_BACKLOG in self.faults:
                self._top_up_backlog(now)
        self.engine.advance(now)

    def _top_up_backlog(self, now: float) -> None:
        fault = self.faults.get(FaultKind.QUEUE_BACKLOG)
        self._backlog = [r for r in self._backlog if r.state is RequestState.WAITING]
        missing = fault.params["n"] - len(self._backlog)
        if missing > 0:
            before = len(self.engine.waiting)
            self.traffic.inject(
                count=missing,
                prompt_tokens=fault.params["prompt_tokens"],
                output_tokens=fault.params["output_tokens"],
                now=now,
            )
            self._backlog.extend(list(self.engine.waiting)[before:])

    # -- faults ----------------------------------------------------------------------------

    def apply_fault(self, data: Any) -> Fault:
        """Parse and activate a fault (FaultError on bad input); returns it with defaults filled."""
        return self.add_fault(parse_fault(data, now=self.clock()))

    def add_fault(self, fault: Fault) -> Fault:
        """Activate a parsed fault; FaultError when it names a GPU this instance does not have."""
        check_gpus(fault, indices=self.gpu_indices, instance=self.spec.name)
        self.faults.add(fault)
        if fault.kind is FaultKind.CRASH:
            self._crash(fault)
        self._faults_changed()
        return fault

    def clear_faults(self, kind: FaultKind | None = None) -> None:
        if kind is None:
            self.faults.clear()
        else:
            self.faults.remove(kind)
        self._faults_changed()

    def _faults_changed(self) -> None:
        if self.exit_code is not None and FaultKind.CRASH not in self.faults:
            self._restart()
        self._apply_effects()
        if self.should_listen != self.listening:
            self._spawn(self.sync_listening(delay=GO_DOWN_DELAY_S if self.listening else 0.0))

    def _apply_effects(self) -> None:
        knobs = self.engine.knobs
        knobs.prefill_factor = self.faults.param(FaultKind.SLOW_PREFILL, "factor") or 1.0
        knobs.step_factor = self.faults.param(FaultKind.TPS_DROP, "factor") or 1.0
        knobs.stalled = FaultKind.ENGINE_STALL in self.faults
        dead = FaultKind.ENGINE_DEAD in self.faults or self.exit_code is not None
        if dead and not knobs.dead:
            self.engine.fail_all()
        knobs.dead = dead
        self.engine.pool.reserve_fraction(self.faults.param(FaultKind.KV_NEAR_FULL, "fraction") or 0.0)
        if FaultKind.QUEUE_BACKLOG not in self.faults:
            self._backlog = []
        apply_engine_effects(self.engine, spec=self.spec, faults=self.faults)

    def _crash(self, fault: Fault) -> None:
        self.exit_code = fault.params["exit_code"]
        self.oom_killed = fault.params["oom_killed"]
        if self._on_crash is not None:
            self._on_crash(self)

    def _restart(self) -> None:
        self.exit_code, self.oom_killed = None, False
        self.restarts += 1
        self._boot(streams=self.traffic.profiles())

    # -- what the servers and /_sim routes use -------------------------------------------

    def start_generation(self, **submit: Any) -> Generation:
        self.last_generation_at = self.clock()
        return Generation(self.engine, arrival=self.clock(), **submit)

    def metrics_body(self, render: Callable[[], bytes]) -> bytes:
        if FaultKind.MALFORMED_METRICS in self.faults:
            return malformed_metrics(model=self.spec.served_model_name)
        size_mb = self.faults.param(FaultKind.HUGE_METRICS, "size_mb")
        return huge_metrics(real=render(), size_mb=size_mb) if size_mb else render()

    def set_load(self, data: Any) -> LoadProfile:
        profile = load_profile_from_mapping(data, where="load")
        self.traffic.set_stream(profile, now=self.clock())
        return profile

    def log_access(
        self, *, client: str, method: str, path: str, status: int, elapsed: float, size: int = 0
    ) -> None:
        stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime())
        self.access_log.append(
            f'{client} - - [{stamp}] "{method} {path} HTTP/1.1" {status} {size} "-" "-" rt={elapsed:.3f}'
        )

    def _log_background(self, req: EngineRequest) -> None:
        status = _BACKGROUND_STATUS.get(req.finish_reason or "", 200)
        elapsed = (req.finished_at or self.clock()) - req.arrival
        self.log_access(
            client=req.client,
            method="POST",
            path=self.server.generate_path,
            status=status,
            elapsed=elapsed,
            size=req.output_tokens * 5,
        )

    def access_log_lines(self, *, limit: int) -> list[str]:
        return list(self.access_log)[-limit:] if limit > 0 else []

    @property
    def gpu_indices(self) -> list[int]:
        """The indices /_sim/nvml reports for this instance's GPUs (the inventory's, when known)."""
        return gpu_indices(self.spec)

    def nvml(self) -> dict[str, Any]:
        spec, engine = self.spec, self.engine
        load = GpuLoad(
            holds_memory=self.exit_code is None,
            busy_fraction=engine.busy_fraction,
            occupancy=min(1.0, engine.num_running / spec.max_num_seqs),
            memory_share=_memory_share(spec),
            process_name=_process_name(spec),
            pid=1000 + spec.seed % 60000 + 7 * self.restarts,
            thermal_throttle=FaultKind.TPS_DROP in self.faults,
            xid=self.faults.param(FaultKind.GPU_XID, "xid"),
            xid_gpu=self.faults.param(FaultKind.GPU_XID, "gpu"),
        )
        return nvml_reading(spec=spec, load=load)

    def state(self) -> dict[str, Any]:
        return instance_state(self)


def new_engine(spec: InstanceSpec, *, now: float) -> Engine:
    num_gpu_blocks, block_size = spec.num_gpu_blocks, spec.block_size
    if spec.engine == "tgi":
        stats = EngineStats(buckets=tgi_buckets(spec))
    elif spec.engine == "sglang":
        stats = EngineStats(buckets=sglang_buckets(spec))
        # SGLang's KV pool is counted in tokens (page size 1): the same memory, 1-token pages.
        num_gpu_blocks, block_size = spec.num_gpu_blocks * spec.block_size, 1
    else:
        early = (
            spec.engine == "vllm"
            and vllm_versions.metric_generation(spec.version) is vllm_versions.MetricGeneration.V1_EARLY
        )
        stats = EngineStats.for_vllm(
            max_model_len=spec.max_model_len,
            iteration_tokens=ITERATION_TOKENS_0_8 if early else ITERATION_TOKENS,
        )
    return Engine(
        perf=perf_model_for(spec),
        stats=stats,
        num_gpu_blocks=num_gpu_blocks,
        block_size=block_size,
        max_num_seqs=spec.max_num_seqs,
        max_num_batched_tokens=spec.max_num_batched_tokens,
        enable_prefix_caching=bool(spec.enable_prefix_caching),
        now=now,
        seed=spec.seed,
    )


def _memory_share(spec: InstanceSpec) -> float:
    if spec.engine == "ollama":  # loads the weights and a context, no pool
        return min(1.0, spec.weights_gib * 1.15 * 1024 / (spec.gpu_total_mib * spec.gpu_count))
    return spec.gpu_memory_utilization


def _process_name(spec: InstanceSpec) -> str:
    if spec.engine == "ollama":
        return "/usr/bin/ollama"
    if spec.engine == "tgi":
        return "/opt/conda/bin/python3.11"
    if spec.engine == "sglang":  # setproctitle of the scheduler that holds the GPU (rank 0's)
        return "sglang::scheduler" if spec.gpu_count == 1 else "sglang::scheduler_TP0"
    if vllm_versions.metric_generation(spec.version) is vllm_versions.MetricGeneration.V0:
        return "python3"
    return "VLLM::EngineCore"


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock
