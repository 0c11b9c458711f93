from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.htmx import wants_partial
from core.roles import Role, has_role, role_required
from fleet.charts import gpu_memory_by_host
from ops_console import health
from ops_console.home import home_status


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    report = health.run_checks()
    # Who is asking is in the database (sessions, users): while it is down, everyone gets the
    # flags only, and the details are in the log.
    details = report.database.ok and _sees_health_details(request.user)
    return JsonResponse(report.as_dict(details=details), status=200 if report.ok else 503)


def _sees_health_details(user) -> bool:  # noqa: ANN001
    """Hosts, ports and errors are for staff and admins, not for whoever reaches the URL."""
    return bool(user.is_active and user.is_staff) or has_role(user, Role.ADMIN)


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page's <link rel="icon"> says. The static
    URL is looked up per request: in production it needs collectstatic's manifest."""
    return redirect(static("ops_console/favicon.svg"), permanent=True)


@role_required(Role.VIEWER)
def home(request: HttpRequest) -> HttpResponse:
    context = {"status": home_status(), "poll_seconds": settings.OVERVIEW_POLL_S}
    if wants_partial(request, "home-live"):
        return render(request, "ops_console/_home_live.html", context)
    if context["status"].counts["gpus"]:
        context["memory_figure"] = gpu_memory_by_host()
    return render(request, "ops_console/home.html", context)
