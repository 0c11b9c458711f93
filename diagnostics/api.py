"""The sizing calculator over the JSON API: the same inputs as the page's query string
(GET) or a JSON object (POST), the same JSON as `manage.py size --json`. The GPU is a
catalogue key, a name as nvidia-smi prints it, or a custom GPU given by its memory."""

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
from diagnostics import sizing_service
from diagnostics.forms import SizingForm


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
    "gpu": 'A catalogue key ("h100-80gb") or the name nvidia-smi prints ("NVIDIA H100 80GB HBM3"); '
    '"custom" or left out with gpu_memory_gib / gpu_memory_mib for another GPU.',
    "gpu_memory_gib": "Another GPU's total memory per GPU, in GiB.",
    "gpu_memory_mib": "Another GPU's total memory per GPU, in MiB as nvidia-smi's memory.total.",
}


class SizingView(APIView):
    permission_classes = [ToolPermission]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                name, OpenApiTypes.STR, required=name == "model", description=_DESCRIBED.get(name, "")
            )
            for name in SizingForm.base_fields
        ],
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT},
        summary="Size a model on GPUs with vLLM flags",
    )
    def get(self, request: Request) -> Response:
        return self._size(request.query_params)

    @extend_schema(
        request=OpenApiTypes.OBJECT, responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT}
    )
    def post(self, request: Request) -> Response:
        return self._size(request.data)

    def _size(self, data: object) -> Response:
        query = _query(data)
        if query is None:
            return Response(
                {"errors": {"__all__": [gettext("Send a JSON object of sizing inputs.")]}}, status=400
            )
        form = SizingForm(_with_defaults(query))
        if not form.is_valid():
            return Response({"errors": form.errors}, status=400)
        try:
            return Response(sizing_service.run(form).to_dict())
        except sizing_service.SizingInputError as exc:
            return Response({"errors": {"__all__": [shown(exc.message)]}}, status=400)
