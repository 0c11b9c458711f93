"""Sizing a model by its Hugging Face id: the sizing page's fetch form (and its "Fetch again"),
which takes the catalogue's copy or fetches the model from the hub, then opens its sizing with
the inputs the page had. When the hub cannot say, the form says why and, with the hub out of
reach, offers the upload of config.json instead."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from core.htmx import wants_partial
from core.roles import Role, role_required
from diagnostics import hub_service
from diagnostics.forms import ConfigUploadForm, HubFetchForm, SizingForm, sizing_inputs
from diagnostics.models import ModelSpec
from diagnostics.sizing import hub


@require_POST
@role_required(Role.ENGINEER)
def fetch(request: HttpRequest) -> HttpResponse:
    form = HubFetchForm(request.POST)
    if not form.is_valid():
        return _failed(request, form, None)
    try:
        spec, fetched = hub_service.model_for_hf_id(
            form.cleaned_data["hf_id"], refresh=form.cleaned_data["refresh"]
        )
    except hub.HubError as exc:
        return _failed(request, form, exc)
    messages.success(request, _done(spec, fetched=fetched))
    return open_sizing(request, request.POST, model=spec.key)


def open_sizing(request: HttpRequest, data: QueryDict, *, model: str) -> HttpResponse:
    """The sizing of `model` with the inputs the page posted along with its card (htmx
    includes them): a redirect, which htmx follows as a whole page."""
    url = f"{reverse('diagnostics:sizing')}?{urlencode({**sizing_inputs(data), 'model': model})}"
    return HttpResponseClientRedirect(url) if wants_partial(request) else redirect(url)


def page_context(form: SizingForm) -> dict[str, Any]:
    """The sizing page's part: the fetch form, offered for a model named by a Hub id the
    catalogue lacks, and the model chosen (its source and date, when it was fetched)."""
    offer = form.hub_id_offered()
    return {
        "hub_form": HubFetchForm(initial={"hf_id": offer} if offer else None),
        "hub_offer": offer,
        "hub_endpoint": settings.HF_ENDPOINT,
        "model_spec": form.specs.get(str(form.data.get("model", "")).strip()),
    }


def _failed(request: HttpRequest, form: HubFetchForm, error: hub.HubError | None) -> HttpResponse:
    context = {
        "hub_form": form,
        "hub_error": error,
        "hub_endpoint": settings.HF_ENDPOINT,
        "upload_form": ConfigUploadForm(initial={"name": form.cleaned_data.get("hf_id", "")})
        if error is not None and error.offers_upload
        else None,
    }
    if wants_partial(request):  # htmx swaps a 200 only: the card carries the error
        return render(request, "diagnostics/sizing/_hub_fetch.html", context)
    status = hub_service.http_status(error) if error else 400
    return render(request, "diagnostics/sizing/hub.html", context, status=status)


def _done(spec: ModelSpec, *, fetched: bool) -> str:
    values = {"id": spec.hf_id, "endpoint": settings.HF_ENDPOINT, "key": spec.key}
    if fetched:
        return gettext("%(id)s was fetched from %(endpoint)s into the sizing catalogue as %(key)s.") % values
    if spec.source == ModelSpec.Source.HUB and spec.fetched_at:
        values["date"] = formats.date_format(timezone.localtime(spec.fetched_at), "SHORT_DATETIME_FORMAT")
        return (
            gettext("%(id)s is in the sizing catalogue, fetched on %(date)s; “Fetch again” refreshes it.")
            % values
        )
    return gettext("%(id)s is in the sizing catalogue already, as %(key)s.") % values
