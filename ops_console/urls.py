from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from diagnostics import urls as diagnostics_urls
from incidents import urls as incidents_urls
from ops_console import views

SECTIONS = [
    (
        "incidents",
        "incidents:index",
        "Incidents",
        "Incidents opened from alerts, their timelines, root causes and review statistics.",
    ),
    (
        "troubleshoot",
        "diagnostics:troubleshoot",
        "Troubleshoot",
        "Decision-tree walkthroughs fed by live probe data, and log triage.",
    ),
    (
        "sizing",
        "diagnostics:sizing",
        "Sizing",
        "GPU memory and KV-cache sizing that follows vLLM's own accounting.",
    ),
    (
        "configs",
        "diagnostics:configs",
        "Configs",
        "Generators for vLLM launch commands, nginx gateways, Kubernetes, systemd and alert rules.",
    ),
]


def _section_patterns(app: str, built: list | None = None) -> tuple[list, str]:
    """Placeholder pages for the sections of `app` not built yet, after the built ones."""
    built = built or []
    taken = {pattern.name for pattern in built}
    patterns = built + [
        path(
            f"{slug}/",
            views.section,
            {"title": title, "section": slug, "summary": summary},
            name=url_name.split(":")[1],
        )
        for slug, url_name, title, summary in SECTIONS
        if url_name.startswith(app + ":") and url_name.split(":")[1] not in taken
    ]
    return patterns, app


urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("fleet/", include("fleet.urls")),
    path("api/", include("fleet.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include(_section_patterns("incidents", incidents_urls.urlpatterns), namespace="incidents")),
    path(
        "", include(_section_patterns("diagnostics", diagnostics_urls.urlpatterns), namespace="diagnostics")
    ),
    path("admin/", admin.site.urls),
]
