from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.htmx import wants_partial
from core.roles import Role, role_required
from fleet.charts import gpu_memory_by_host
from ops_console import health
from ops_console.home import home_status


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    database = health.check_database()
    broker = health.check_broker()
    worker = health.check_worker() if database.ok else {"ok": False, "detail": "database down"}
    ok = database.ok and broker.ok
    body = {
        "status": "ok" if ok else "fail",
        "checks": {"database": database.as_dict(), "broker": broker.as_dict(), "worker": worker},
    }
    return JsonResponse(body, status=200 if ok else 503)


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
