"""Sizing a model from its directory on a GPU host: the sizing page's "From a host" card asks the
host's live agent to read config.json and the weights' sizes there, polls until the answer is in
the catalogue, then opens its sizing with the GPU and flags the page had (as the Hugging Face
card does). With no live agent, or when the agent cannot read the directory, the card says why
and offers the upload of config.json instead."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HTMX_STOP_POLLING

from core.htmx import wants_partial
from core.roles import Role, role_required
from diagnostics import host_model_service
from diagnostics.forms import HostModelForm, sizing_inputs
from diagnostics.views.sizing_hub import open_sizing
from fleet.models import AgentRequest

POLL_SECONDS = 1
CARD = "diagnostics/sizing/_host_fetch.html"
PAGE = "diagnostics/sizing/host.html"


@require_http_methods(["GET", "POST"])
@role_required(Role.ENGINEER)
def from_host(request: HttpRequest) -> HttpResponse:
    """GET: the card (the sizing page loads it); POST: ask the host's agent, then poll."""
    hosts = host_model_service.hosts_with_agents()
    form = HostModelForm(request.POST or None, hosts=hosts)
    context: dict[str, Any] = {"host_form": form, "hosts": hosts}
    if request.method == "POST" and form.is_valid():
        host, model_dir = form.cleaned_data["host"], form.cleaned_data["model_dir"]
        try:
            asked = host_model_service.ask_host(host=host, model_dir=model_dir)
        except host_model_service.NoAgent as exc:
            context["host_error"] = exc.message
        else:
            url = _answer_url(asked, request.POST, model_dir=model_dir)
            if not wants_partial(request):
                return redirect(url)
            return _card(request, {"asked": asked, "model_dir": model_dir, "poll_url": url})
    return _card(request, context, status=400 if form.errors or "host_error" in context else 200)


@require_GET
@role_required(Role.ENGINEER)
def answer(request: HttpRequest, request_id: str) -> HttpResponse:
    """The request's progress, polled each second; its sizing once the model is in the
    catalogue; what went wrong (and the upload) when it is not coming."""
    asked = get_object_or_404(
        AgentRequest.objects.select_related("host"), request_id=request_id, task=host_model_service.TASK
    )
    result = host_model_service.outcome(asked)
    model_dir = request.GET.get("model_dir", "")
    if result.spec is not None:
        messages.success(
            request,
            gettext("%(host)s's agent read %(dir)s: it is in the sizing catalogue as %(key)s.")
            % {"host": asked.host.name, "dir": model_dir or result.spec.name, "key": result.spec.key},
        )
        return open_sizing(request, request.GET, model=result.spec.key)
    if result.waiting:
        url = _answer_url(asked, request.GET, model_dir=model_dir)
        return _card(request, {"asked": asked, "model_dir": model_dir, "poll_url": url})
    hosts = host_model_service.hosts_with_agents()
    initial = {"host": asked.host.name, "model_dir": model_dir}
    context = {
        "host_form": HostModelForm(initial=initial, hosts=hosts),
        "hosts": hosts,
        "host_error": result.error,
    }
    response = _card(request, context)
    if wants_partial(request):
        response.status_code = HTMX_STOP_POLLING
    return response


def _card(request: HttpRequest, context: dict[str, Any], *, status: int = 200) -> HttpResponse:
    context = {"poll_seconds": POLL_SECONDS, **context}
    if wants_partial(request):  # htmx swaps a 200 only: the card carries any error
        return render(request, CARD, context)
    return render(request, PAGE, context, status=status)


def _answer_url(asked: AgentRequest, data: QueryDict, *, model_dir: str) -> str:
    """Where the request's progress is polled, carrying the page's sizing inputs along."""
    params = {name: value for name, value in sizing_inputs(data).items() if name != "model"}
    params["model_dir"] = model_dir
    return f"{reverse('diagnostics:sizing-host-answer', args=[asked.request_id])}?{urlencode(params)}"
