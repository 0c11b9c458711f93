"""`python -m fleet.agent.selfcheck [--root /] [--nvml pynvml] [--model-dir /models/x] [--port 8000]`:
what this machine's agent would report, printed as JSON: the NVML reading, the snapshot of
the host-side checks and the pre-deploy checklist's facts and items (judged for a vLLM
instance on the first GPU). Run on a GPU host before enrolling its agent, or on a device
machine to see the checks on real hardware. Needs no broker, database or Celery."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def _english(value: Any) -> Any:
    """Messages (as dicts) in English, for reading the output."""
    from core.i18n import Message

    if isinstance(value, dict):
        if "msgid" in value and "params" in value:
            return str(Message.from_json(value))
        return {k: _english(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_english(v) for v in value]
    return value


def run(*, root: Path, nvml: str, model_dir: str, port: int, docker_socket: str) -> dict[str, Any]:
    from fleet.agent import checks
    from fleet.agent.gather import predeploy_facts
    from fleet.hostchecks.predeploy import PredeployRequirements, checklist_summary, run_checklist
    from fleet.nvml.simulated_backend import nvml_backend_for

    config = SimpleNamespace(root=root, docker_socket=docker_socket)
    reading, error = None, ""
    try:
        reading = nvml_backend_for("pynvml").read() if nvml == "pynvml" else None
    except Exception as exc:  # a machine without a driver: the other checks still run
        error = f"{type(exc).__name__}: {exc}"
    snapshot = checks.snapshot(
        config=config, expect={"instances": [{"name": "self", "port": port}]}, reading=reading
    )
    facts = predeploy_facts(config=config, reading=reading, model_dir=model_dir, port=port)
    requirements = PredeployRequirements(
        engine="vllm",
        engine_version="0.11.2",
        weights_bytes=None,
        gpu_indexes=(0,) if reading and reading.gpus else (),
        tensor_parallel_size=1,
        gpu_memory_utilization=0.9,
        port=port,
    )
    items = run_checklist(facts=facts, requirements=requirements)
    return _english(
        {
            "nvml": reading.to_dict() if reading else {"error": error or "NVML off"},
            "snapshot": snapshot,
            "predeploy": {
                "facts": facts.to_dict(),
                "items": [item.to_dict() for item in items],
                "overall": checklist_summary(items).overall,
            },
        }
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="/")
    parser.add_argument("--nvml", choices=("pynvml", "off"), default="pynvml")
    parser.add_argument("--model-dir", default="/models/model")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--docker-socket", default="/var/run/docker.sock")
    args = parser.parse_args(argv)
    from django.conf import settings

    if not settings.configured:
        settings.configure(USE_I18N=False)  # messages in English; no project settings needed
    result = run(
        root=Path(args.root),
        nvml=args.nvml,
        model_dir=args.model_dir,
        port=args.port,
        docker_socket=args.docker_socket,
    )
    json.dump(result, sys.stdout, indent=1, default=str)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
