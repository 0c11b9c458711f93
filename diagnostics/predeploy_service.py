"""The pre-deploy checklist (guide 4.1.1) run against a GPU host from its page: the host's
agent gathers the facts (agent.predeploy_facts on its long queue), the checklist judges them
(fleet.hostchecks.predeploy) against what one instance needs, the weights from the sizing
module. A run keeps its facts and its items, pass / fail / warn / unknown with evidence."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from core.i18n import later
from diagnostics.models import PredeployRun
from diagnostics.sizing_service import SizingInputError, size_spec, spec_for_instance
from fleet.agent.dispatch import ask, port_of
from fleet.agent.status import agent_of
from fleet.hostchecks.predeploy import PredeployRequirements, checklist_summary, run_checklist
from fleet.hostchecks.predeploy_facts import PredeployFacts
from fleet.models import AgentRequest, GpuHost, Instance

PURPOSE = "predeploy"
ANSWER_WITHIN_S = 120  # the agent's long queue may be busy with a log pull


class NoAgent(Exception):
    """The host has no live agent to gather the facts."""


def weights_bytes(instance: Instance) -> int | None:
    """The model's weights, all GPUs together, from the sizing module; None when the model
    is not in the catalogue (the RAM and disk items are then unknown)."""
    spec, _, missing = spec_for_instance(instance)
    if spec is None or missing:
        return None
    try:
        sizing = size_spec(spec)
    except SizingInputError:
        return None
    return int(sizing.weights_bytes_per_gpu * instance.tensor_parallel_size * instance.pipeline_parallel_size)


def requirements_for(instance: Instance) -> PredeployRequirements:
    return PredeployRequirements(
        engine=instance.engine,
        engine_version=instance.engine_version,
        weights_bytes=weights_bytes(instance),
        gpu_indexes=tuple(sorted(g.index for g in instance.gpus.all())),
        tensor_parallel_size=instance.tensor_parallel_size,
        gpu_memory_utilization=instance.gpu_memory_utilization,
        port=port_of(instance.base_url),
    )


def start(*, host: GpuHost, instance: Instance, model_dir: str, requested_by: str) -> PredeployRun:
    """Ask the host's agent for the facts; the run is judged when they come (judge_answer)."""
    agent = agent_of(host)
    if agent is None or agent.is_missing():
        raise NoAgent(later("host %(host)s has no live agent to run the checklist", host=host.name))
    requirements = requirements_for(instance)
    run = PredeployRun.objects.create(
        host=host,
        instance=instance,
        requested_by=requested_by,
        requirements=_requirements_json(requirements) | {"model_dir": model_dir},
    )
    run.request = ask(
        "agent.predeploy_facts",
        host=host,
        purpose=f"{PURPOSE}:{run.pk}",
        expires_s=ANSWER_WITHIN_S,
        model_dir=model_dir,
        port=requirements.port,
    )
    run.save(update_fields=["request"])
    return run


def _requirements_json(requirements: PredeployRequirements) -> dict[str, Any]:
    return {
        "engine": requirements.engine,
        "engine_version": requirements.engine_version,
        "weights_bytes": requirements.weights_bytes,
        "gpu_indexes": list(requirements.gpu_indexes),
        "tensor_parallel_size": requirements.tensor_parallel_size,
        "gpu_memory_utilization": requirements.gpu_memory_utilization,
        "port": requirements.port,
    }


def judge_answer(request: AgentRequest) -> PredeployRun | None:
    """Judge the facts an agent sent for a run (connected to fleet's agent_answered)."""
    if not request.purpose.startswith(f"{PURPOSE}:"):
        return None
    run = PredeployRun.objects.filter(request=request).first()
    if run is None:
        return None
    answer = request.answer or {}
    run.judged_at = timezone.now()
    try:
        facts = PredeployFacts.from_dict(answer.get("facts"))
    except ValueError as exc:
        run.error = str(answer.get("error") or exc)[:2000]
        run.save(update_fields=["error", "judged_at"])
        return run
    values = {k: v for k, v in run.requirements.items() if k != "model_dir"}
    items = run_checklist(facts=facts, requirements=PredeployRequirements(**values))
    run.facts, run.items = facts.to_dict(), [item.to_dict() for item in items]
    run.overall = checklist_summary(items).overall
    run.save(update_fields=["facts", "items", "overall", "judged_at"])
    return run


def default_model_dir(instance: Instance) -> str:
    """Where the instance's model lives, as far as the console knows: the --model path its
    process runs with (the host agent's snapshot), else /models/<the served model's last part>."""
    agent = agent_of(instance.host)
    for engine in (agent.snapshot or {}).get("engines", []) if agent else []:
        model = (engine.get("flags") or {}).get("model") if isinstance(engine, dict) else None
        if (
            isinstance(model, str)
            and model.startswith("/")
            and port_of(instance.base_url) in engine.get("ports", [])
        ):
            return model
    return "/models/" + instance.served_model_name.rsplit("/", 1)[-1]
