"""The sizing page (results follow the inputs over HTMX, state in the URL), the comparison
of up to three set-ups, adding a model from its config.json, and sizing an instance (a served
model the catalogue lacks but named by a Hugging Face id is offered to be fetched)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import strip_tags
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods

from core import figures
from core.htmx import wants_partial
from core.i18n import shown
from core.roles import Role, role_required
from diagnostics import configgen_fill, sizing_service
from diagnostics.forms import ConfigUploadForm, SizingForm
from diagnostics.sizing.hub import looks_like_id
from diagnostics.sizing.versions import DEFAULT_VERSION
from diagnostics.views import sizing_hub
from fleet import gpu_catalog
from fleet.models import Instance

DEFAULTS = {
    "model": "llama-3.1-8b-instruct",
    "gpu": "h100-80gb",
    "gpus": "1",
    "pipeline_parallel_size": "1",
    "kv_cache_dtype": "auto",
    "avg_prompt_tokens": "1500",
    "avg_output_tokens": "500",
    "vllm_version": DEFAULT_VERSION,
}
COMPARE_PREFIXES = ("a", "b", "c")
COMPARE_INPUTS = (
    "model", "gpu", "gpus", "tensor_parallel_size", "gpu_memory_utilization", "max_model_len",
    "max_num_seqs", "kv_cache_dtype", "quantization", "vllm_version",
)  # fmt: skip


def with_defaults(query: QueryDict, prefix: str = "") -> QueryDict:
    """The query with every unset input at its default, so a bare URL sizes something."""
    params = query.copy()
    for name, value in DEFAULTS.items():
        key = f"{prefix}-{name}" if prefix else name
        if key not in params:
            params[key] = value
    return params


def sized(form: SizingForm) -> dict[str, Any]:
    """Template context for a bound form: the sizing, its chart and JSON, or the error."""
    if not form.is_valid():
        return {"sizing": None}
    try:
        result = sizing_service.run(form)
    except sizing_service.SizingInputError as exc:
        return {"sizing": None, "input_error": shown(exc.message)}
    return {"sizing": result, "result": result.to_dict()}


@require_GET
@role_required(Role.ENGINEER)
def page(request: HttpRequest) -> HttpResponse:
    form = SizingForm(with_defaults(request.GET))
    context: dict[str, Any] = {"form": form, **sized(form), **sizing_hub.page_context(form)}
    if context["sizing"] is not None:
        context["chart"] = sizing_service.concurrency_chart(context["sizing"])
        context["chart_json"] = figures.to_json(context["chart"])
        context["query"] = form.data.urlencode()
        context["compare_query"] = urlencode({f"a-{k}": v for k, v in form.data.items()})
        context["config_query"] = _config_query(form, context["result"])
    if wants_partial(request, "results"):
        return render(request, "diagnostics/sizing/_results.html", context)
    return render(request, "diagnostics/sizing/page.html", context)


def _config_query(form: SizingForm, result: dict[str, Any]) -> str:
    """The launch generator's values for this sizing: its flags, host memory, model and GPU."""
    spec = form.specs[form.cleaned_data["model"]]
    values = configgen_fill.from_sizing(result)
    values["model"] = spec.hf_id or spec.key
    if form.cleaned_data["gpu"] != gpu_catalog.CUSTOM_KEY:  # the generator knows catalogue GPUs only
        values["gpu_model"] = form.cleaned_data["gpu"]
    return urlencode(values)


@require_GET
@role_required(Role.ENGINEER)
def compare(request: HttpRequest) -> HttpResponse:
    """Up to three set-ups side by side; a set-up without a model is left out."""
    columns = []
    for prefix in COMPARE_PREFIXES:
        chosen = prefix == "a" or bool(request.GET.get(f"{prefix}-model"))
        if chosen:
            form = SizingForm(with_defaults(request.GET, prefix), prefix=prefix)
        else:
            form = SizingForm(initial={k: v for k, v in DEFAULTS.items() if k != "model"}, prefix=prefix)
        if prefix != "a":
            form.fields["model"].choices = [("", gettext("— none —")), *form.fields["model"].choices]
        for name in COMPARE_INPUTS:  # the table's row header is not the field's label
            field = form.fields[name]
            field.widget.attrs["aria-label"] = gettext("%(field)s, set-up %(setup)s") % {
                "field": strip_tags(str(field.label)),
                "setup": prefix.upper(),
            }
        columns.append({"prefix": prefix, "form": form, "active": chosen, **(sized(form) if chosen else {})})
    input_rows = [
        (columns[0]["form"][name].label, [column["form"][name] for column in columns])
        for name in COMPARE_INPUTS
    ]
    return render(request, "diagnostics/sizing/compare.html", {"columns": columns, "input_rows": input_rows})


@require_http_methods(["GET", "POST"])
@role_required(Role.ENGINEER)
def upload(request: HttpRequest) -> HttpResponse:
    form = ConfigUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        spec = sizing_service.save_upload(form.entry)
        messages.success(
            request,
            gettext("%(name)s is in the sizing catalogue as %(key)s.") % {"name": spec.name, "key": spec.key},
        )
        return redirect(f"{reverse('diagnostics:sizing')}?{urlencode({'model': spec.key})}")
    return render(
        request, "diagnostics/sizing/upload.html", {"form": form}, status=400 if form.errors else 200
    )


@require_GET
@role_required(Role.ENGINEER)
def for_instance(request: HttpRequest, pk: int) -> HttpResponse:
    """The sizing page pre-filled with an inventory instance's model, GPUs and flags."""
    instance = get_object_or_404(Instance, pk=pk)
    params, missing = sizing_service.params_for_instance(instance)
    if "model" not in params and looks_like_id(instance.served_model_name):
        params["model"] = instance.served_model_name  # the page offers to fetch it from the Hub
    for problem in missing:
        messages.warning(
            request,
            gettext("Sizing %(instance)s: %(problem)s; pick it on the form.")
            % {"instance": instance.name, "problem": shown(problem)},
        )
    return redirect(f"{reverse('diagnostics:sizing')}?{urlencode(params)}")
