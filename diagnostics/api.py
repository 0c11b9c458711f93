"""The sizing calculator over the JSON API: the same inputs as the page's query string
(GET) or a JSON object (POST), the same JSON as `manage.py size --json`. The GPU is a
catalogue key, a name as nvidia-smi prints it, or a custom GPU given by its memory. The model
is a catalogue one (`model`) or a Hugging Face id (`hf_id`), fetched from the hub the first
time and kept in the catalogue."""

from __future__ import annotations

from django.http import QueryDict
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.i18n import shown
from core.roles import ToolPermission
from diagnostics import hub_service, sizing_service
from diagnostics.forms import SizingForm
from diagnostics.sizing import hub


def _query(data: object) -> QueryDict | None:
    if isinstance(data, QueryDict):
        return data
    if not isinstance(data, dict):
        return None
    query = QueryDict(mutable=True)
    for key, value in data.items():
        if value is not None:
            query[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return query


def _with_defaults(query: QueryDict) -> QueryDict:
    """Inputs left out take the page's defaults (one GPU, the default vLLM version…), so a
    script needs to name only the model and the GPU."""
    filled = query.copy()
    for name, field in SizingForm.base_fields.items():
        if name not in filled and field.initial is not None:
            filled[name] = str(field.initial)
    return filled


_DESCRIBED = {
    "model": "A catalogue model: its key, Hugging Face id or alias. Required unless hf_id is given.",
    "hf_id": "A Hugging Face model id (owner/name) instead of model: taken from the catalogue, or fetched "
    "from the hub (HF_ENDPOINT) and kept there. 404 when the hub lacks it, 502/504 when the hub cannot "
    "be reached (then add the model from its config.json).",
    "gpu": 'A catalogue key ("h100-80gb") or the name nvidia-smi prints ("NVIDIA H100 80GB HBM3"); '
    '"custom" or left out with gpu_memory_gib / gpu_memory_mib for another GPU.',
    "gpu_memory_gib": "Another GPU's total memory per GPU, in GiB.",
    "gpu_memory_mib": "Another GPU's total memory per GPU, in MiB as nvidia-smi's memory.total.",
}

# 404, 502 and 504 only for an hf_id the hub lacks, cannot be reached for, or does not answer for.
_RESPONSES = {status: OpenApiTypes.OBJECT for status in (200, 400, 404, 502, 504)}


class SizingView(APIView):
    permission_classes = [ToolPermission]

    @extend_schema(
        parameters=[
            OpenApiParameter(name, OpenApiTypes.STR, required=False, description=_DESCRIBED.get(name, ""))
            for name in ["hf_id", *SizingForm.base_fields]
        ],
        responses=_RESPONSES,
        summary="Size a model on GPUs with vLLM flags",
    )
    def get(self, request: Request) -> Response:
        return self._size(request.query_params)

    @extend_schema(request=OpenApiTypes.OBJECT, responses=_RESPONSES)
    def post(self, request: Request) -> Response:
        return self._size(request.data)

    def _size(self, data: object) -> Response:
        query = _query(data)
        if query is None:
            return Response(
                {"errors": {"__all__": [gettext("Send a JSON object of sizing inputs.")]}}, status=400
            )
        if query.get("hf_id"):
            query, failed = _with_hub_model(query)
            if failed is not None:
                return failed
        form = SizingForm(_with_defaults(query))
        if not form.is_valid():
            return Response({"errors": _errors(form)}, status=400)
        try:
            return Response(sizing_service.run(form).to_dict())
        except sizing_service.SizingInputError as exc:
            return Response({"errors": {"__all__": [shown(exc.message)]}}, status=400)


def _with_hub_model(query: QueryDict) -> tuple[QueryDict, Response | None]:
    """The query with `model` set to the catalogue key of the model `hf_id` names (fetched from
    the hub when the catalogue lacks it), or the answer saying why there is none."""
    if query.get("model"):
        message = gettext("Give model or hf_id, not both.")
        return query, Response({"errors": {"hf_id": [message]}}, status=400)
    try:
        spec, _ = hub_service.model_for_hf_id(query["hf_id"])
    except hub.HubError as exc:
        body = {"errors": {"hf_id": [shown(exc.message)]}, "hub_problem": exc.problem.value}
        return query, Response(body, status=hub_service.http_status(exc))
    query = query.copy()
    query["model"] = spec.key
    return query, None


def _errors(form: SizingForm) -> dict[str, list[str]]:
    """The form's errors; a model the catalogue lacks but named by a Hub id gets the way to fetch it."""
    errors = {name: list(messages) for name, messages in form.errors.items()}
    if typed := form.hub_id_offered():
        errors["model"].append(
            gettext("To fetch %(id)s from Hugging Face, pass it as hf_id.") % {"id": typed}
        )
    return errors
