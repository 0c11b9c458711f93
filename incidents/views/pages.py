"""Incident pages."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from incidents.models import Incident
from ops_console.roles import Role, role_required


@role_required(Role.VIEWER)
def index(request: HttpRequest) -> HttpResponse:
    incidents = Incident.objects.prefetch_related("instances")[:100]
    return render(request, "incidents/index.html", {"incidents": incidents})


@role_required(Role.VIEWER)
def detail(request: HttpRequest, pk: int) -> HttpResponse:
    from django.shortcuts import get_object_or_404

    incident = get_object_or_404(Incident.objects.prefetch_related("instances", "hosts", "timeline"), pk=pk)
    return render(request, "incidents/detail.html", {"incident": incident})
