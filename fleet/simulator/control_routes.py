"""The fleet's control port: every instance's /_sim routes, reachable even when it is down.

An instance that crashed or refuses connections cannot be asked anything on its own port;
`manage.py simulate --control-port 8199` (or FleetRunner(control_port=...)) serves them on
one port for the whole fleet. `make run` starts it on $SIM_CONTROL_PORT (8199), where
`manage.py fault` (settings.SIMULATOR_CONTROL_URL) talks to it.

GET    /_sim/instances                      name, engine, version, port, listening, exit code,
                                            GPU indices, GPU host and active faults of each
GET    /_sim/instances/{name}/state         as the instance's own /_sim/state
GET    /_sim/instances/{name}/nvml          as /_sim/nvml
GET    /_sim/hosts/{host}/dcgm              dcgm-exporter's /metrics text for the GPUs of every
                                            instance whose spec names that gpu_host (the
                                            inventory's host name), each GPU once
                                            (fleet.simulator.dcgm_exposition)
POST   /_sim/instances/{name}/faults        as /_sim/faults, every kind: a crash stops the port
                                            and records the exit code, refuse_connections
                                            closes it; 400 naming the field on a bad fault
DELETE /_sim/instances/{name}/faults        as /_sim/faults (?kind=...); clearing a crash
                                            restarts the instance on its port, clearing
                                            refuse_connections opens the port again
POST   /_sim/instances/{name}/load          as /_sim/load
GET    /_sim/instances/{name}/access_log    as /_sim/access_log

An unknown instance, or a host no instance runs on, is a 404 whose JSON names it.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from fleet.nvml.base import NvmlReading
from fleet.simulator.dcgm_exposition import CONTENT_TYPE, dcgm_text, host_gpus
from fleet.simulator.sim_routes import (
    access_log_response,
    add_fault_response,
    clear_faults_response,
    set_load_response,
)

RUNNER_KEY: web.AppKey[Any] = web.AppKey("runner")


def control_app(runner: Any) -> web.Application:
    app = web.Application()
    app[RUNNER_KEY] = runner
    app.add_routes([
        web.get("/_sim/instances", _list),
        web.get("/_sim/instances/{name}/state", _state),
        web.get("/_sim/instances/{name}/nvml", _nvml),
        web.get("/_sim/hosts/{host}/dcgm", _host_dcgm),
        web.post("/_sim/instances/{name}/faults", _add_fault),
        web.delete("/_sim/instances/{name}/faults", _clear_faults),
        web.post("/_sim/instances/{name}/load", _set_load),
        web.get("/_sim/instances/{name}/access_log", _access_log),
    ])  # fmt: skip
    return app


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, indent=1))


def _instance(request: web.Request) -> Any:
    name = request.match_info["name"]
    try:
        return request.app[RUNNER_KEY].instance(name)
    except KeyError:
        error = f"no simulated instance {name!r}; GET /_sim/instances lists them"
        raise web.HTTPNotFound(text=json.dumps({"error": error}), content_type="application/json") from None


async def _list(request: web.Request) -> web.Response:
    rows = [
        {
            "name": inst.spec.name,
            "engine": inst.spec.engine,
            "version": inst.spec.version,
            "port": inst.port,
            "listening": inst.listening,
            "exit_code": inst.exit_code,
            "gpus": inst.gpu_indices,
            "gpu_host": inst.spec.gpu_host,
            "faults": inst.faults.to_list(now=inst.clock()),
        }
        for inst in request.app[RUNNER_KEY].instances.values()
    ]
    return _json({"instances": rows})


async def _state(request: web.Request) -> web.Response:
    return _json(_instance(request).state())


async def _nvml(request: web.Request) -> web.Response:
    return _json(_instance(request).nvml())


async def _host_dcgm(request: web.Request) -> web.Response:
    host = request.match_info["host"]
    instances = request.app[RUNNER_KEY].instances.values()
    mine = sorted((i for i in instances if i.spec.gpu_host == host), key=lambda i: i.spec.name)
    if not mine:
        known = sorted({i.spec.gpu_host for i in instances if i.spec.gpu_host})
        error = f"no simulated instance runs on host {host!r}; hosts: {', '.join(known) or 'none'}"
        raise web.HTTPNotFound(text=json.dumps({"error": error}), content_type="application/json")
    readings = [NvmlReading.from_dict(inst.nvml()) for inst in mine]
    text = dcgm_text(gpus=host_gpus(readings), driver_version=readings[0].driver_version, hostname=host)
    return web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE})


async def _add_fault(request: web.Request) -> web.Response:
    return await add_fault_response(_instance(request), request)


async def _clear_faults(request: web.Request) -> web.Response:
    return clear_faults_response(_instance(request), request)


async def _set_load(request: web.Request) -> web.Response:
    return await set_load_response(_instance(request), request)


async def _access_log(request: web.Request) -> web.Response:
    return access_log_response(_instance(request), request)
