"""Every page of the console, with the least role meant to open it, over a small fleet: the
page list the every-page browser test and the Chinese page sweep both walk."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from core.roles import Role
from incidents.models import Incident
from tests.factories import make_gateway, make_gpu, make_host, make_instance

GENERATORS = ["vllm", "docker", "k8s", "systemd", "nginx", "client", "alerts", "grafana"]

KINDS = (("hosts", "host"), ("gpus", "gpu"), ("instances", "instance"), ("gateways", "gateway"))
# Each page as a template over the fleet's objects, and the least role meant to open it.
PAGES: dict[str, Role] = {
    "/": Role.VIEWER,
    "/fleet/": Role.VIEWER,
    "/incidents/": Role.VIEWER,
    "/incidents/{incident}/": Role.VIEWER,
    "/incidents/review/": Role.VIEWER,
    "/troubleshoot/": Role.VIEWER,
    "/troubleshoot/guide/": Role.VIEWER,
    "/troubleshoot/instances/{instance}/": Role.VIEWER,
    "/sizing/instances/{instance}/": Role.ENGINEER,
    "/incidents/{incident}/edit/": Role.SRE,
    "/drills/": Role.VIEWER,
    "/sizing/": Role.ENGINEER,
    "/sizing/compare/": Role.ENGINEER,
    "/configs/": Role.ENGINEER,
    "/configs/nginx/lint/": Role.ENGINEER,
    "/troubleshoot/triage/": Role.ENGINEER,
    "/fleet/import/": Role.SRE,
    "/incidents/new/": Role.SRE,
    **{
        page: role
        for plural, key in (
            ("hosts", "host"),
            ("gpus", "gpu"),
            ("instances", "instance"),
            ("gateways", "gateway"),
        )
        for page, role in (
            (f"/fleet/{plural}/", Role.VIEWER),
            (f"/fleet/{plural}/{{{key}}}/", Role.VIEWER),
            (f"/fleet/{plural}/new/", Role.SRE),
            (f"/fleet/{plural}/{{{key}}}/edit/", Role.SRE),
        )
    },
    **{f"/configs/{generator}/": Role.ENGINEER for generator in GENERATORS},
}


# The Django admin's entry points, for staff: the index and the probe settings (one row).
ADMIN_PAGES = ["/admin/", "/admin/fleet/probesettings/"]


def make_fleet() -> dict:
    """A host with one GPU, an instance on it behind a gateway, and an open incident."""
    host = make_host(name="rack-a")
    gpu = make_gpu(host, index=0)
    instance = make_instance(host, gpus=[gpu], name="vllm-a")
    gateway = make_gateway(name="gw-a", instances=[instance])
    incident = Incident.objects.create(
        title="vllm-a: HTTP 503", category="other", severity="critical",
        started_at=timezone.now() - timedelta(minutes=12),
    )  # fmt: skip
    incident.instances.set([instance])
    return {"host": host, "gpu": gpu, "instance": instance, "gateway": gateway, "incident": incident}


def pages(fleet: dict) -> dict[str, Role]:
    """PAGES with the fleet's primary keys filled in."""
    keys = {name: obj.pk for name, obj in fleet.items()}
    return {template.format(**keys): role for template, role in PAGES.items()}


def names(fleet: dict) -> set[str]:
    """The names the fleet's objects show, which stay as they are in any language."""
    shown = set()
    for obj in fleet.values():
        for attribute in ("name", "served_model_name", "model", "address", "title"):
            value = getattr(obj, attribute, None)
            if isinstance(value, str) and attribute != "title":
                shown.add(value)
    return shown
