"""Which queue a task goes to. Work that must run on a GPU host goes to that host's
queues, never to the central worker: `host.<name>` for short checks, `host.<name>.long`
for long ones (a pre-deploy checklist, a log pull), so a slow check never delays the GPU
reading. The chunks of the scheduled probe sweeps (`fleet.probe_chunk`) go to PROBE_QUEUE,
named on the task itself. Everything else stays on the central queue
(settings.CELERY_TASK_DEFAULT_QUEUE).

Celery calls `route_agent_tasks` for every task sent (settings.CELERY_TASK_ROUTES)."""

from __future__ import annotations

from typing import Any

AGENT_TASK_PREFIX = "agent."
# The checks an agent runs; nothing else is ever routed to a host's queues.
AGENT_TASKS = frozenset(
    {"agent.read_gpus", "agent.snapshot", "agent.predeploy_facts", "agent.pull_logs", "agent.model_config"}
)
LONG_TASKS = frozenset({"agent.predeploy_facts", "agent.pull_logs"})
# Where agents send their reports: the central queue, where fleet.agent_report runs.
CENTRAL_QUEUE = "console"
# Where the chunks of the scheduled probe sweeps go: any prober worker, on any machine, takes
# them (docs/multi-machine-prober.md). Never a host's agent: its queues are its own.
PROBE_QUEUE = "probes"
REPORT_TASK = "fleet.agent_report"


def host_queue(host: str, *, long: bool = False) -> str:
    return f"host.{host}.long" if long else f"host.{host}"


def host_queues(host: str) -> list[str]:
    """Both queues of a host, as its agent consumes them."""
    return [host_queue(host), host_queue(host, long=True)]


def route_agent_tasks(
    name: str, args: Any, kwargs: dict[str, Any] | None, options: dict[str, Any], task: Any = None, **kw: Any
) -> dict[str, str] | None:
    """The host's queue for an agent task (by its `host` keyword), None for the rest."""
    if not name.startswith(AGENT_TASK_PREFIX):
        return None
    if name not in AGENT_TASKS:
        raise ValueError(f"{name} is not one of the agent's checks: {', '.join(sorted(AGENT_TASKS))}")
    host = (kwargs or {}).get("host")
    if not host:
        raise ValueError(f"{name} needs host=<the GPU host's name> to be routed to that host's agent")
    queue = host_queue(host, long=name in LONG_TASKS)
    return {"queue": queue, "routing_key": queue}
