"""The agent's own Celery app: it consumes one host's queues and knows only the fixed,
read-only checks below. A task that is not one of them is unknown to this app, so the
worker discards it; a task addressed to another host is refused. What a check finds
goes back as a signed report (fleet.agent.credentials) to the central queue, where
fleet.agent_report stores it. The agent never touches the console's database.

Started by `manage.py agent --host NAME` (fleet/management/commands/agent.py)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from celery import Celery

from fleet.agent.credentials import sign
from fleet.agent.routing import AGENT_TASKS, CENTRAL_QUEUE, REPORT_TASK, host_queues
from fleet.nvml.base import NvmlBackend, NvmlError, NvmlReading

log = logging.getLogger("fleet.agent")

AGENT_VERSION = "1"


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    host: str
    token: str
    broker_url: str
    root: Path = Path("/")
    nvml: str = "pynvml"  # "pynvml", "off", or "simulated=<URL of /_sim/nvml>"
    docker_socket: str = "/var/run/docker.sock"
    heartbeat_s: float = 30.0
    transport_options: dict[str, Any] = field(default_factory=dict)  # the filesystem broker's folders
    hostname: str = field(default_factory=socket.gethostname)

    def nvml_backend(self) -> NvmlBackend | None:
        from fleet.nvml.simulated_backend import nvml_backend_for

        if self.nvml == "off":
            return None
        kind, _, url = self.nvml.partition("=")
        return nvml_backend_for(kind, url=url) if url else nvml_backend_for(kind)


def parse_nvml_choice(value: str) -> str:
    """Check an --nvml value: pynvml, off or simulated=URL; ValueError saying which are allowed."""
    kind, _, url = value.partition("=")
    if value in ("pynvml", "off") or (kind == "simulated" and url.startswith(("http://", "https://"))):
        return value
    raise ValueError(f"--nvml must be pynvml, off or simulated=<URL of /_sim/nvml>, not {value!r}")


class Agent:
    """The app, its reports and its heartbeat, for one host."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.started_at = time.time()
        self.app = _celery_app(config)
        self._backend: NvmlBackend | None = None
        self._backend_error = ""
        try:
            self._backend = config.nvml_backend()
        except Exception as exc:  # no pynvml, a bad URL: the agent still runs its other checks
            self._backend_error = f"{type(exc).__name__}: {exc}"
        self._stop = threading.Event()
        _register_tasks(self)
        _forget_other_tasks(self.app)

    # Reports -----------------------------------------------------------------------------
    def report(self, kind: str, body: dict[str, Any]) -> None:
        sent_at = round(time.time(), 3)
        host, token = self.config.host, self.config.token
        envelope = {
            "host": host,
            "kind": kind,
            "sent_at": sent_at,
            "body": body,
            "signature": sign(token=token, host=host, kind=kind, sent_at=sent_at, body=body),
        }
        self.app.send_task(REPORT_TASK, kwargs={"envelope": envelope}, queue=CENTRAL_QUEUE)

    def heartbeat_body(self) -> dict[str, Any]:
        return {
            "hostname": self.config.hostname,
            "agent_version": AGENT_VERSION,
            "pid": os.getpid(),
            "started_at": self.started_at,
            "queues": host_queues(self.config.host),
            "capabilities": {
                "nvml": self._backend is not None,
                "nvml_error": self._backend_error,
                "docker_socket": Path(self.config.docker_socket).exists(),
                "root": str(self.config.root),
            },
        }

    def heartbeat_forever(self) -> None:
        while not self._stop.is_set():
            try:
                self.report("heartbeat", self.heartbeat_body())
            except Exception:  # the broker is away: try again next beat
                log.warning("heartbeat not sent", exc_info=True)
            self._stop.wait(self.config.heartbeat_s)

    def start_heartbeat(self) -> threading.Thread:
        thread = threading.Thread(target=self.heartbeat_forever, name="agent-heartbeat", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    # Checks ------------------------------------------------------------------------------
    def mine(self, host: str) -> bool:
        """Is a task addressed to this agent's host? One for another host is refused, loudly."""
        if host == self.config.host:
            return True
        log.error("refused a task for host %r: this agent serves %r", host, self.config.host)
        self.report("misrouted", {"task_host": str(host)[:253]})
        return False

    def snapshot(self, expect: dict[str, Any]) -> dict[str, Any]:
        from fleet.agent import checks

        return checks.snapshot(config=self.config, expect=expect, reading=self.nvml_reading())

    def nvml_reading(self) -> NvmlReading | None:
        if self._backend is None:
            return None
        try:
            return self._backend.read()
        except Exception:  # the GPU reading has its own report; the others go on without it
            return None

    def answer(self, request_id: object, answer: dict[str, Any]) -> None:
        self.report("answer", {"request_id": str(request_id)[:64], "answer": answer})

    def predeploy_facts(self, *, model_dir: object, port: object) -> dict[str, Any]:
        from fleet.agent.gather import predeploy_facts

        if not isinstance(model_dir, str) or not model_dir.startswith("/") or len(model_dir) > 1024:
            return {"error": "the model directory must be an absolute path"}
        if not isinstance(port, int) or not 0 < port < 65536:
            return {"error": "the port must be a number from 1 to 65535"}
        facts = predeploy_facts(
            config=self.config, reading=self.nvml_reading(), model_dir=model_dir, port=port
        )
        return {"facts": facts.to_dict()}

    def model_config(self, *, model_dir: object) -> dict[str, Any]:
        """The sizing files of a model directory (fleet.hostchecks.model_dir), or why not."""
        from fleet.hostchecks.model_dir import ModelDirError, read_model_dir

        if not isinstance(model_dir, str) or len(model_dir) > 1024:
            return {"error": "the model directory must be an absolute path of at most 1024 characters"}
        try:
            return {"model": read_model_dir(model_dir, root=Path(self.config.root)).to_dict()}
        except ModelDirError as exc:
            return {"error": exc.message.to_json()}
        except Exception as exc:  # a bug must not leave the console waiting for the answer
            return {"error": f"{type(exc).__name__}: {exc}"}

    def pull_logs(self, *, source: object, lines: object) -> dict[str, Any]:
        from fleet.hostchecks.engine_logs import LogSource, pull_engine_log

        try:
            chosen = LogSource.from_dict(source)
        except (ValueError, TypeError) as exc:
            return {"error": f"bad log source: {exc}"}
        count = lines if isinstance(lines, int) and 0 < lines <= 2000 else 200
        pulled = pull_engine_log(
            source=chosen, lines=count, docker_socket=self.config.docker_socket, root=Path(self.config.root)
        )
        return {"log": pulled.to_dict()}

    def read_gpus(self) -> dict[str, Any]:
        if self._backend is None:
            return {"error": self._backend_error or "NVML is off on this agent (--nvml off)"}
        try:
            return {"reading": self._backend.read().to_dict()}
        except NvmlError as exc:
            return {"error": str(exc)}
        except Exception as exc:  # a backend bug must not take the agent down
            return {"error": f"{type(exc).__name__}: {exc}"}


def _celery_app(config: AgentConfig) -> Celery:
    app = Celery("ops_agent", broker=config.broker_url, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_ignore_result=True,
        worker_prefetch_multiplier=1,
        task_default_queue=host_queues(config.host)[0],
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        enable_utc=True,
        broker_transport_options=config.transport_options,
    )
    return app


def _forget_other_tasks(app: Celery) -> None:
    """Celery gives every app the project's shared tasks (probe cycles and the like) when it
    is finalized; the agent's app keeps only its checks and Celery's own, so anything else
    that reaches the host's queue is an unregistered task the worker discards."""
    app.finalize(auto=True)
    for name in list(app.tasks):
        if name not in AGENT_TASKS and not name.startswith("celery."):
            app.tasks.unregister(name)


def _register_tasks(agent: Agent) -> None:
    """The fixed checks, and nothing else."""
    app = agent.app

    @app.task(name="agent.read_gpus", ignore_result=True, soft_time_limit=20, time_limit=30)
    def read_gpus(*, host: str) -> None:
        if agent.mine(host):
            agent.report("gpus", agent.read_gpus())

    @app.task(name="agent.snapshot", ignore_result=True, soft_time_limit=40, time_limit=60)
    def snapshot(*, host: str, expect: dict[str, Any] | None = None) -> None:
        if agent.mine(host):
            agent.report("snapshot", agent.snapshot(expect if isinstance(expect, dict) else {}))

    @app.task(name="agent.predeploy_facts", ignore_result=True, soft_time_limit=100, time_limit=120)
    def predeploy_facts(*, host: str, request_id: str, model_dir: str = "", port: int = 8000) -> None:
        if agent.mine(host):
            agent.answer(request_id, agent.predeploy_facts(model_dir=model_dir, port=port))

    @app.task(name="agent.model_config", ignore_result=True, soft_time_limit=20, time_limit=30)
    def model_config(*, host: str, request_id: str, model_dir: str = "") -> None:
        if agent.mine(host):
            agent.answer(request_id, agent.model_config(model_dir=model_dir))

    @app.task(name="agent.pull_logs", ignore_result=True, soft_time_limit=100, time_limit=120)
    def pull_logs(*, host: str, request_id: str, source: dict | None = None, lines: int = 200) -> None:
        if agent.mine(host):
            agent.answer(request_id, agent.pull_logs(source=source, lines=lines))
