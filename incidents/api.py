"""Incidents over the JSON API, token or session authenticated like the inventory's:
acknowledging one, the same acknowledgement as the incident page's button."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from core.roles import Role, has_role
from incidents import lifecycle
from incidents.models import Incident


class IncidentChangePermission(BasePermission):
    """API: changing an incident needs the sre role, as on its page."""

    message = "Changing incidents needs the sre role."

    def has_permission(self, request: Request, view: Any) -> bool:
        return has_role(request.user, Role.SRE)


class AcknowledgementSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    acknowledged_at = serializers.DateTimeField(allow_null=True)
    acknowledged_by = serializers.CharField(allow_blank=True, help_text="Blank when set by an edit.")


ERROR = inline_serializer("IncidentError", fields={"error": serializers.CharField()})


@extend_schema(
    summary="Acknowledge an incident",
    description="Idempotent: an incident acknowledged before keeps its first acknowledgement. "
    "A resolved incident is refused with 409.",
    request=None,
    responses={200: AcknowledgementSerializer, 404: ERROR, 409: ERROR},
)
@api_view(["POST"])
@permission_classes([IncidentChangePermission])
def acknowledge(request: Request, pk: int) -> Response:
    incident = Incident.objects.filter(pk=pk).first()
    if incident is None:
        return Response({"error": f"There is no incident {pk}."}, status=404)
    try:
        lifecycle.acknowledge(incident, at=timezone.now(), user=request.user.get_username())
    except ValueError as exc:
        return Response({"error": str(exc)}, status=409)
    body = {
        "id": incident.pk,
        "status": incident.status,
        "acknowledged_at": incident.acknowledged_at,
        "acknowledged_by": lifecycle.acknowledged_by(incident),
    }
    return Response(AcknowledgementSerializer(body).data)
