"""Sizing a model from its directory on a GPU host, at Django's edge: the host's live agent reads
config.json, the safetensors index, hf_quant_config.json and the shards' sizes there
(`agent.model_config`, fleet/hostchecks/model_dir.py), and its answer becomes a catalogue model
(source "uploaded config.json") through the same parser as an upload. A host without a live agent
cannot be asked: the caller offers the upload instead.

The answer lands on the AgentRequest row (fleet.agent.reports); whoever waits for it (the sizing
page's poll, `manage.py size --host`) calls `outcome()`, which saves the model once: its
`sources` name the host, the path and the request."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from django.db import transaction

from core.i18n import Message, later
from diagnostics import sizing_service
from diagnostics.models import ModelSpec
from diagnostics.sizing.architecture import ConfigError
from diagnostics.sizing.catalog import CatalogEntry, entry_from_upload, parse_json
from diagnostics.sizing.hub import looks_like_id
from fleet.agent.dispatch import ask, live_agents
from fleet.hostchecks.model_dir import INDEX, QUANT_CONFIG, ModelDirFiles
from fleet.models import AgentRequest

TASK = "agent.model_config"
PURPOSE = "sizing"
ANSWER_WITHIN_S = 30
MAX_NAME = 120  # ModelSpec.name
_READ_BY = ", read by the host's agent"  # the first source: "host:/dir/config.json, read by ..."


class HostModelError(Exception):
    """The host's model could not be had; `message` (core.i18n) says why. str() is English."""

    def __init__(self, message: Message | str) -> None:
        super().__init__(message)
        self.message = message


class NoAgent(HostModelError):
    """The host has no live agent to ask."""


@dataclass(frozen=True)
class Outcome:
    """Where a request stands: waiting, its model in the catalogue, or what went wrong."""

    request: AgentRequest
    spec: ModelSpec | None = None
    error: Message | str | None = None

    @property
    def waiting(self) -> bool:
        return self.spec is None and self.error is None


def hosts_with_agents() -> list[str]:
    """The names of the hosts whose agent is live, the ones that can be asked."""
    return sorted(agent.host.name for agent in live_agents())


def ask_host(*, host: str, model_dir: str, wait_s: float = ANSWER_WITHIN_S) -> AgentRequest:
    """Ask the host's live agent for the model directory's files; NoAgent when it has none."""
    agent = next(iter(live_agents(host__name=host)), None)
    if agent is None:
        raise NoAgent(
            later(
                "%(host)s has no live agent to read the model directory: start its agent, or add the model "
                "from its config.json instead",
                host=host,
            )
        )
    return ask(TASK, host=agent.host, purpose=PURPOSE, expires_s=wait_s, model_dir=model_dir)


def outcome(request: AgentRequest) -> Outcome:
    """Where the request stands; once answered, its model saved to the catalogue (once: a
    second call finds the model the first saved)."""
    status = request.shown_status()
    if status == AgentRequest.Status.SENT:
        return Outcome(request)
    if status == AgentRequest.Status.EXPIRED:
        waited = (request.expires_at - request.sent_at).total_seconds()
        return Outcome(
            request,
            error=later(
                "%(host)s's agent did not answer within %(seconds)s s: is it running, and is the console's "
                "worker (which stores its answers) running?",
                host=request.host.name,
                seconds=f"{waited:.0f}",
            ),
        )
    with transaction.atomic():
        AgentRequest.objects.select_for_update().filter(pk=request.pk).first()  # one save per answer
        saved = ModelSpec.objects.filter(sources__icontains=_marker(request.request_id)).first()
        if saved is not None:
            return Outcome(request, spec=saved)
        try:
            entry = entry_from_answer(request)
        except HostModelError as exc:
            return Outcome(request, error=exc.message)
        return Outcome(request, spec=_save(entry, answered_at=request.answered_at))


def _save(entry: CatalogEntry, *, answered_at: datetime | None) -> ModelSpec:
    """A new catalogue model, or the one read from the same host and directory before,
    refreshed in place (same key, so shared sizing links still work) unless it was read later
    than this answer."""
    read_line = entry.sources[0].split(_READ_BY, 1)[0] + _READ_BY
    candidates = ModelSpec.objects.filter(source=ModelSpec.Source.UPLOADED, sources__icontains=read_line)
    earlier = next((s for s in candidates if s.sources and str(s.sources[0]).startswith(read_line)), None)
    if earlier is None:
        return sizing_service.save_upload(entry)
    if answered_at is not None and earlier.updated_at > answered_at:
        return earlier
    earlier.reread(entry)
    earlier.save()
    return earlier


def entry_from_answer(request: AgentRequest) -> CatalogEntry:
    """The catalogue entry of an answered request; HostModelError saying what is wrong."""
    host = request.host.name
    answer = request.answer if isinstance(request.answer, dict) else {}
    if "error" in answer:
        problem = answer["error"]
        shown = (
            Message.from_json(problem) if isinstance(problem, dict) and "msgid" in problem else str(problem)
        )
        raise HostModelError(
            later("%(host)s's agent could not read the model: %(problem)s", host=host, problem=shown)
        )
    try:
        files = ModelDirFiles.from_dict(answer.get("model"))
    except (TypeError, ValueError) as exc:
        raise HostModelError(
            later(
                "%(host)s's agent sent an answer the console cannot read: %(problem)s",
                host=host,
                problem=str(exc),
            )
        ) from None
    try:
        return build_entry(files, host=host, request_id=request.request_id, read_at=request.answered_at)
    except ConfigError as exc:
        raise HostModelError(
            later("%(where)s: %(problem)s", where=f"{host}:{files.model_dir}", problem=exc.args[0])
        ) from None


def build_entry(
    files: ModelDirFiles, *, host: str, request_id: str, read_at: datetime | None = None
) -> CatalogEntry:
    """A catalogue entry from what the agent read: config.json (with hf_quant_config.json folded
    in), the weights from the index's total_size, else the *.safetensors files' total.
    ConfigError naming the file and field at fault."""
    config_text, folded = with_quantization(files)
    index_text = files.index_text
    if index_text is None and files.safetensors_bytes:
        index_text = json.dumps({"metadata": {"total_size": files.safetensors_bytes}})
    entry = entry_from_upload(config_text=config_text, index_text=index_text, name=_name(files, host))
    where = _where(files, host)
    when = f" on {read_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if read_at else ""
    sources = [f"{where}/config.json{_READ_BY}{when} {_marker(request_id)}"]
    if files.index_text is not None:
        sources.append(f"{where}/{INDEX}" + (" (its metadata.total_size only)" if files.index_cut else ""))
    elif files.safetensors_bytes:
        sources.append(
            f"{where}: {files.safetensors_count} *.safetensors files, {files.safetensors_bytes:,} bytes"
        )
    if folded:
        sources.append(f"{where}/{QUANT_CONFIG}, folded into quantization_config as vLLM reads it")
    return replace(entry, hf_id=entry.hf_id if looks_like_id(entry.hf_id) else "", sources=tuple(sources))


def with_quantization(files: ModelDirFiles) -> tuple[str, bool]:
    """config.json's text with hf_quant_config.json folded into its quantization_config, and
    whether it was. As vLLM does: the file is taken whole when config.json has no
    quantization_config (get_config in
    https://github.com/vllm-project/vllm/blob/main/vllm/transformers_utils/config.py), and a
    ModelOpt producer's quant_method is set from its quant_algo, modelopt_fp4 for NVFP4 and
    modelopt otherwise (ModelConfig's quantization normalisation in
    https://github.com/vllm-project/vllm/blob/main/vllm/config/model.py)."""
    if files.quant_config_text is None:
        return files.config_text, False
    config = parse_json(files.config_text, what="config.json")
    if not isinstance(config, dict) or config.get("quantization_config") is not None:
        return files.config_text, False  # the config's own wins (or the parser names what is wrong)
    quant = parse_json(files.quant_config_text, what=QUANT_CONFIG)
    if not isinstance(quant, dict):
        raise ConfigError(later("%(file)s must be a JSON object", file=QUANT_CONFIG))
    producer = quant.get("producer")
    if not quant.get("quant_method") and isinstance(producer, dict) and producer.get("name") == "modelopt":
        inner = quant.get("quantization")
        algo = str(inner.get("quant_algo") or "").upper() if isinstance(inner, dict) else ""
        quant = {**quant, "quant_method": "modelopt_fp4" if algo == "NVFP4" else "modelopt"}
    return json.dumps({**config, "quantization_config": quant}), True


def _where(files: ModelDirFiles, host: str) -> str:
    """The directory as host:path, the way the sources and the name spell it."""
    return f"{host}:{files.model_dir.rstrip('/') or '/'}"


def _name(files: ModelDirFiles, host: str) -> str:
    """ "ORG/NAME (host)" when config.json names its Hub id, else "host:directory"."""
    try:
        named = json.loads(files.config_text).get("_name_or_path")
    except (ValueError, AttributeError, RecursionError):  # the parser names what is wrong
        named = None
    if isinstance(named, str) and looks_like_id(named.strip()):
        return f"{named.strip()} ({host})"[:MAX_NAME]
    where = _where(files, host)
    if len(where) <= MAX_NAME:
        return where
    keep = max(MAX_NAME - len(host) - 2, 40)  # the directory's end names the model
    return f"{host}:…{files.model_dir.rstrip('/')[-keep:]}"[-MAX_NAME:]


def _marker(request_id: str) -> str:
    """How the first source names the request, by which its answer's model is found again."""
    return f"(agent request {request_id})"
