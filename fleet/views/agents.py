"""A GPU host's agent on the host page: its condition and heartbeat (a polled partial),
enrolling it and rotating its token (SREs), and how to start it on the host."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from core.roles import Role, has_role, role_required
from fleet.agent.install import AgentInstall
from fleet.agent.reports import token_for
from fleet.agent.status import agent_of, condition_of, instance_on_host
from fleet.models import GpuHost, HostAgent, Instance
from fleet.models.agents import new_salt

POLL_SECONDS = 10


def _host(pk: int) -> GpuHost:
    return get_object_or_404(GpuHost.objects.select_related("agent").filter(drill=False), pk=pk)


@require_GET
@role_required(Role.VIEWER)
def agent_panel(request: HttpRequest, pk: int) -> HttpResponse:
    host = _host(pk)
    agent = agent_of(host)
    context = {
        "host": host,
        "agent": agent,
        "condition": condition_of(host),
        "missing": agent.is_missing() if agent else None,
        "poll_seconds": POLL_SECONDS,
    }
    if agent and has_role(request.user, Role.SRE):
        context["install"] = AgentInstall(
            host=host.name, token=token_for(agent), broker_url=settings.AGENT_BROKER_URL
        )
    part = "_agent_status" if request.GET.get("part") == "status" else "_agent"
    return render(request, f"fleet/hosts/{part}.html", context)


@require_POST
@role_required(Role.SRE)
def enroll(request: HttpRequest, pk: int) -> HttpResponse:
    host = _host(pk)
    created = HostAgent.objects.get_or_create(host=host)[1]
    if created:
        messages.success(
            request, _("Agent enrolled for %(host)s: start it on the host as shown.") % {"host": host}
        )
    return redirect(f"{host.get_absolute_url()}#agent")


@require_POST
@role_required(Role.SRE)
def rotate(request: HttpRequest, pk: int) -> HttpResponse:
    host = _host(pk)
    agent = get_object_or_404(HostAgent, host=host)
    agent.token_salt = new_salt()
    agent.save(update_fields=["token_salt"])
    messages.success(
        request, _("New token for the agent of %(host)s: the old one no longer works.") % {"host": host}
    )
    return redirect(f"{host.get_absolute_url()}#agent")


@require_GET
@role_required(Role.VIEWER)
def instance_on_host_panel(request: HttpRequest, pk: int) -> HttpResponse:
    """The instance page's "On the host" card, from its host agent's latest snapshot."""
    instance = get_object_or_404(Instance.objects.select_related("host", "host__agent"), pk=pk)
    context = {
        "object": instance,
        "seen": instance_on_host(instance),
        "has_agent": agent_of(instance.host) is not None,
    }
    return render(request, "fleet/instances/_on_host.html", context)
