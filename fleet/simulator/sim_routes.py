"""The /_sim control routes every simulated instance serves beside its engine's API.

GET    /_sim/state        queues, KV blocks, faults, load streams, exit code
POST   /_sim/faults       {"kind": ..., params..., "duration_s": ...} -> 201, or 400 naming the problem
                          (and the field); a gpu the instance does not have is a 400 too
DELETE /_sim/faults       clear all faults (?kind=hang clears one)
GET    /_sim/nvml         the GPUs as NVML would report them (fleet.nvml.base.NvmlReading JSON)
GET    /_sim/dcgm         the same GPUs as dcgm-exporter's /metrics text (dcgm_exposition.py),
                          Hostname the spec's gpu_host (none when it has none)
POST   /_sim/load         {"stream": ..., "requests_per_s": ..., ...}: start, change or stop a stream
GET    /_sim/access_log   the last requests in nginx's combined format (?limit=N)

They bypass the HTTP-level faults, so a hanging instance can still be told to stop.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from fleet.nvml.base import NvmlReading
from fleet.simulator.dcgm_exposition import CONTENT_TYPE, dcgm_text
from fleet.simulator.faults import FaultError, FaultKind
from fleet.simulator.spec import SpecError


def sim_routes() -> list[web.RouteDef]:
    return [
        web.get("/_sim/state", _state),
        web.post("/_sim/faults", _add_fault),
        web.delete("/_sim/faults", _clear_faults),
        web.get("/_sim/nvml", _nvml),
        web.get("/_sim/dcgm", _dcgm),
        web.post("/_sim/load", _set_load),
        web.get("/_sim/access_log", _access_log),
    ]


INSTANCE_KEY: web.AppKey[Any] = web.AppKey("instance")


def instance_of(request: web.Request) -> Any:
    """The SimInstance an application serves."""
    return request.app[INSTANCE_KEY]


_instance = instance_of


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, indent=1))


async def _body(request: web.Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": "the body must be JSON"}), content_type="application/json"
        ) from None


async def _state(request: web.Request) -> web.Response:
    return _json(_instance(request).state())


async def _add_fault(request: web.Request) -> web.Response:
    return await add_fault_response(_instance(request), request)


async def _clear_faults(request: web.Request) -> web.Response:
    return clear_faults_response(_instance(request), request)


async def add_fault_response(instance: Any, request: web.Request) -> web.Response:
    """POST .../faults for one instance: 201 with the fault, or 400 naming the problem."""
    try:
        fault = instance.apply_fault(await _body(request))
    except FaultError as exc:
        return _json({"error": str(exc), "field": exc.field or None}, status=400)
    return _json(
        {"fault": fault.to_dict(now=instance.clock()), "faults": instance.state()["faults"]}, status=201
    )


def clear_faults_response(instance: Any, request: web.Request) -> web.Response:
    """DELETE .../faults for one instance: all of them, or ?kind=... only."""
    kind = request.query.get("kind")
    if kind is not None and kind not in FaultKind.__members__.values():
        return _json({"error": f"unknown fault kind {kind!r}"}, status=400)
    instance.clear_faults(FaultKind(kind) if kind else None)
    return _json({"faults": instance.state()["faults"]})


async def _nvml(request: web.Request) -> web.Response:
    return _json(_instance(request).nvml())


async def _dcgm(request: web.Request) -> web.Response:
    instance = _instance(request)
    reading = NvmlReading.from_dict(instance.nvml())
    text = dcgm_text(
        gpus=reading.gpus, driver_version=reading.driver_version, hostname=instance.spec.gpu_host
    )
    return web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE})


async def _set_load(request: web.Request) -> web.Response:
    return await set_load_response(_instance(request), request)


async def _access_log(request: web.Request) -> web.Response:
    return access_log_response(_instance(request), request)


async def set_load_response(instance: Any, request: web.Request) -> web.Response:
    """POST .../load for one instance: the streams now running, or 400 naming the field."""
    try:
        instance.set_load(await _body(request))
    except SpecError as exc:
        return _json({"error": str(exc)}, status=400)
    return _json({"load": instance.state()["load"]})


def access_log_response(instance: Any, request: web.Request) -> web.Response:
    """GET .../access_log for one instance: its last ?limit= lines (200 by default)."""
    try:
        limit = int(request.query.get("limit", "200"))
    except ValueError:
        return _json({"error": "limit must be an integer"}, status=400)
    lines = instance.access_log_lines(limit=limit)
    return web.Response(text="".join(line + "\n" for line in lines), content_type="text/plain")
