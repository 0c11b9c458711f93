"""`manage.py fault`: inject and clear simulator faults through the simulator's control port.

    manage.py fault vllm-a crash                        # the port closes, exit code 137
    manage.py fault vllm-a --clear crash                # restarts it, listening on its port
    manage.py fault vllm-a refuse_connections --duration 60
    manage.py fault vllm-a tps_drop --set factor=3
    manage.py fault vllm-a gpu_xid --set xid=48         # on every GPU of the instance
    manage.py fault vllm-a http_503 --set fraction=0.5 --set paths='["/v1"]'
    manage.py fault vllm-a --clear                      # every fault
    manage.py fault vllm-a                              # its state: listening, exit code, faults
    manage.py fault --list                              # every simulated instance

It talks to settings.SIMULATOR_CONTROL_URL, which `make run` serves (`manage.py simulate
--control-port`); --control-url overrides it. --set values are JSON when they parse as JSON
(3, 0.5, true, null, ["/v1"]), else text. The simulator checks the fault (faults.py) and
its message is the command's error.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fleet.simulator.faults import FAULT_KINDS

ALL = "all"
TIMEOUT_S = 5.0
# What an operator needs to know next, for the faults that take the port away.
_NEXT = {
    "crash": "its port is closed; `manage.py fault {name} --clear crash` restarts it",
    "refuse_connections": "its port is closed; `manage.py fault {name} --clear` opens it again",
}


class Command(BaseCommand):
    help = "Inject, clear or list faults on simulated instances, through the simulator's control port."

    def add_arguments(self, parser):
        parser.add_argument("instance", nargs="?", help="the simulated instance's name")
        parser.add_argument("kind", nargs="?", help=f"the fault kind: {', '.join(FAULT_KINDS)}")
        parser.add_argument(
            "--set",
            dest="params",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a fault parameter (repeatable); the value is JSON when it parses, else text",
        )
        parser.add_argument("--duration", type=float, help="seconds until the fault clears itself")
        parser.add_argument(
            "--clear", nargs="?", const=ALL, metavar="KIND", help="clear one kind, or every fault"
        )
        parser.add_argument("--list", action="store_true", help="list the simulated instances and faults")
        parser.add_argument(
            "--control-url", help=f"the control port's URL (default: {settings.SIMULATOR_CONTROL_URL})"
        )

    def handle(self, *args, instance, kind, params, duration, clear, control_url, **options):
        control = ControlPort(base_url=control_url or settings.SIMULATOR_CONTROL_URL)
        if options["list"]:
            self.stdout.write(_table(control.call("GET", "/_sim/instances")["instances"]))
            return
        if not instance:
            raise CommandError("name an instance (manage.py fault INSTANCE KIND), or use --list")
        path = f"/_sim/instances/{quote(instance, safe='')}"
        if clear is not None:
            which = _kind_to_clear(clear=clear, kind=kind)
            query = {} if which is None else {"kind": which}
            faults = control.call("DELETE", f"{path}/faults", params=query)["faults"]
            self.stdout.write(f"{instance}: cleared {which or 'every fault'}; active: {_faults(faults)}")
        elif kind:
            fault = {"kind": kind, **parse_assignments(params)}
            if duration is not None:
                fault["duration_s"] = duration
            added = control.call("POST", f"{path}/faults", json=fault)["fault"]
            self.stdout.write(f"{instance}: {_fault(added)}")
            if kind in _NEXT:
                self.stdout.write(_NEXT[kind].format(name=instance))
        else:
            self.stdout.write(_row(control.call("GET", f"{path}/state")))


class ControlPort:
    """The simulator's control port (fleet/simulator/control_routes.py), over HTTP."""

    def __init__(self, *, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer; CommandError with the simulator's message on 4xx/5xx or no answer."""
        try:
            response = httpx.request(method, self.base_url + path, timeout=TIMEOUT_S, **kwargs)
        except httpx.TransportError as exc:
            raise CommandError(self._unreachable(exc)) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400 or not isinstance(body, dict):
            error = body.get("error") if isinstance(body, dict) else None
            raise CommandError(
                error or f"HTTP {response.status_code} from {response.url}: {response.text[:200]}"
            )
        return body

    def _unreachable(self, exc: Exception) -> str:
        port = urlsplit(self.base_url).port or 8199
        return (
            f"no simulator control port answers at {self.base_url} ({str(exc) or type(exc).__name__}). "
            f"Start one with `manage.py simulate --from-inventory --control-port {port}` or `make run`, "
            "or point --control-url (SIMULATOR_CONTROL_URL) at the one that runs."
        )


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs as a dict; a value is JSON when it parses (3, true, ["/v1"]), else text."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--set takes KEY=VALUE, got {item!r}")
        try:
            values[key.strip()] = json.loads(raw)
        except ValueError:
            values[key.strip()] = raw
    return values


def _kind_to_clear(*, clear: str, kind: str | None) -> str | None:
    """`--clear KIND`, or `KIND --clear`; None: every fault."""
    if clear != ALL and kind and kind != clear:
        raise CommandError(f"clear {clear} or {kind}, not both")
    chosen = kind if clear == ALL else clear
    return None if chosen in (None, ALL) else chosen


def _fault(fault: dict[str, Any]) -> str:
    params = " ".join(
        f"{k}={json.dumps(v)}" for k, v in fault.items() if k not in ("kind", "remaining_s") and v is not None
    )
    left = fault.get("remaining_s")
    until = "until cleared" if left is None else f"{left:.0f} s left"
    return " ".join(part for part in (fault["kind"], params, f"({until})") if part)


def _faults(faults: list[dict[str, Any]]) -> str:
    return "; ".join(_fault(f) for f in faults) or "none"


def _row(inst: dict[str, Any]) -> str:
    if inst["listening"]:
        status = f"listening on {inst['port']}"
    elif inst["exit_code"] is not None:
        status = f"exited with code {inst['exit_code']} (port {inst['port']} closed)"
    else:
        status = f"port {inst['port']} closed"
    gpus = ", ".join(str(i) for i in inst.get("gpus", []))
    return (
        f"{inst['name']}  {inst['engine']} {inst['version']}  {status}  GPUs {gpus or '-'}  "
        f"faults: {_faults(inst['faults'])}"
    )


def _table(instances: list[dict[str, Any]]) -> str:
    return "\n".join(_row(inst) for inst in instances) or "The simulator runs no instances."
