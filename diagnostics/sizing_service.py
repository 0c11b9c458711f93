"""Sizing at Django's edge: from the form (page, API, CLI) or an inventory instance to the
calculator, and its chart."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.utils.translation import gettext

from core import figures
from core.i18n import Message, later
from diagnostics.models import ModelSpec
from diagnostics.sizing import calculator, catalog, kv_cache, versions
from diagnostics.sizing.catalog import CatalogEntry
from diagnostics.sizing.spec_values import spec_from_values
from fleet.models import Instance

_SIZING_VERSIONS = [value for value, _ in versions.VERSION_CHOICES]
CHART_UTILIZATIONS = (0.8, 0.85, 0.9, 0.95)
CHART_KV_DTYPES = (("auto", "solid"), ("fp8", "dash"))


class SizingInputError(ValueError):
    """The inputs name no launch vLLM could make; the message says which input. str() is
    English; `message` the core.i18n message, to show in the reader's language."""

    @property
    def message(self) -> Message | str:
        return self.args[0]


def run(form: Any) -> calculator.Sizing:
    """The sizing for a valid SizingForm; SizingInputError for inputs no launch could have."""
    return size_spec(form.spec())


def params_for_instance(
    instance: Instance, *, specs: list[ModelSpec] | None = None
) -> tuple[dict[str, Any], list[Message]]:
    """Query parameters that size an inventory instance as it is launched, and what could
    not be taken from it. `specs`: the catalogue, when the caller has loaded it already."""
    missing: list[Message] = []
    params: dict[str, Any] = {
        "gpus": instance.tensor_parallel_size * instance.pipeline_parallel_size,
        "tensor_parallel_size": instance.tensor_parallel_size,
        "pipeline_parallel_size": instance.pipeline_parallel_size,
        "gpu_memory_utilization": instance.gpu_memory_utilization,
        "kv_cache_dtype": instance.kv_cache_dtype if instance.kv_cache_dtype.startswith("fp8") else "auto",
    }
    for flag in ("max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        if getattr(instance, flag):
            params[flag] = getattr(instance, flag)
    if instance.quantization:
        params["quantization"] = instance.quantization
    if instance.dtype != "auto":
        params["dtype"] = instance.dtype
    if instance.engine_version:
        params["vllm_version"] = versions.nearest_choice(instance.engine_version, _SIZING_VERSIONS)
    entries = [spec.entry() for spec in specs] if specs is not None else ModelSpec.objects.all().entries()
    entry = catalog.find(instance.served_model_name, entries)
    if entry:
        params["model"] = entry.key
    else:
        missing.append(
            later(
                "the served model %(model)s is not in the sizing catalogue",
                model=repr(instance.served_model_name),
            )
        )
    gpu = min(instance.gpus.all(), key=lambda g: g.index, default=None)  # prefetched by fleet checks
    if gpu:
        params["gpu"] = gpu.model
    else:
        missing.append(later("the instance has no GPUs in the inventory"))
    return params, missing


def spec_for_instance(
    instance: Instance, *, specs: list[ModelSpec] | None = None
) -> tuple[calculator.SizingSpec | None, str, list[Message]]:
    """The calculator's input for an inventory instance as it is launched, straight from
    its record (no form in between): (spec or None, the catalogue key, what is missing)."""
    params, missing = params_for_instance(instance, specs=specs)
    if missing:
        return None, params.get("model", ""), missing
    by_key = {spec.key: spec for spec in (specs if specs is not None else ModelSpec.objects.all())}
    return spec_from_values(params, arch=by_key[params["model"]].architecture()), params["model"], []


def size_spec(spec: calculator.SizingSpec) -> calculator.Sizing:
    """The sizing of a spec; SizingInputError for inputs no launch could have."""
    try:
        return calculator.size(spec)
    except (calculator.SpecError, ValueError) as exc:
        raise SizingInputError(exc.args[0]) from None


def save_upload(entry: CatalogEntry) -> ModelSpec:
    """Add an uploaded model to the catalogue under a key of its own."""
    spec = ModelSpec.from_entry(
        replace(_storable(entry), key=free_key(entry.key)), source=ModelSpec.Source.UPLOADED
    )
    spec.save()
    return spec


def _storable(entry: CatalogEntry) -> CatalogEntry:
    """The entry as the catalogue keeps it: a name from config.json's _name_or_path cut to the
    name's length, and an hf_id too long to be a Hub id dropped."""
    name_length = ModelSpec._meta.get_field("name").max_length
    id_length = ModelSpec._meta.get_field("hf_id").max_length
    name = entry.name if len(entry.name) <= name_length else entry.name[: name_length - 1] + "…"
    return replace(entry, name=name, hf_id=entry.hf_id if len(entry.hf_id) <= id_length else "")


def free_key(key: str) -> str:
    """`key`, or `key-2`, `key-3`... when the catalogue has it already."""
    candidate, n = key, 2
    while ModelSpec.objects.filter(key=candidate).exists():
        candidate, n = f"{key[:58]}-{n}", n + 1
    return candidate


def concurrency_chart(sizing: calculator.Sizing) -> dict:
    """Max concurrency against context length for several gpu_memory_utilization values and
    both KV dtypes, each what the calculator finds with only those inputs changed."""
    top = max(sizing.resolved.max_model_len, 1024)
    contexts = [c for c in (512 * 2**i for i in range(14)) if c <= top]
    if contexts[-1] != top:
        contexts.append(top)
    traces = []
    for kv_dtype, dash in CHART_KV_DTYPES:
        for util in CHART_UTILIZATIONS:
            kv, blocks = calculator.kv_blocks_with(
                sizing, gpu_memory_utilization=util, kv_cache_dtype=kv_dtype
            )
            traces.append(
                figures.scatter(
                    x=contexts,
                    y=[round(kv_cache.concurrency_at(kv, blocks, c), 2) for c in contexts],
                    mode="lines",
                    line={"dash": dash},
                    name=f"{util:g} · KV {kv_dtype}",
                )
            )
    traces.append(
        figures.scatter(
            x=[sizing.average_context, sizing.resolved.max_model_len],
            y=[round(sizing.concurrency_at_average, 2), round(sizing.capacity.max_concurrency, 2)],
            mode="markers",
            marker={"size": 11, "symbol": "diamond"},
            name=gettext("these flags"),
        )
    )
    return figures.figure(
        traces,
        height=360,
        margin={"l": 60, "r": 10, "t": 10, "b": 50},
        xaxis=figures.axis(gettext("tokens per request (context)"), type="log"),
        yaxis=figures.axis(gettext("requests at once"), type="log"),
        legend={"orientation": "h", "y": -0.25},
        hovermode="x unified",
    )
