from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from diagnostics import urls as diagnostics_urls
from diagnostics.api import SizingView
from fleet import urls as fleet_urls
from incidents import urls as incidents_urls
from ops_console import overview, views

# The overview joins fleet, diagnostics and incidents, so it is mounted here, in the
# fleet's namespace; the fleet app imports neither of the others.
fleet_patterns = [path("", overview.overview, name="overview"), *fleet_urls.urlpatterns]

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.favicon),
    path("healthz", views.healthz, name="healthz"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("fleet/", include((fleet_patterns, "fleet"), namespace="fleet")),
    path("api/sizing/", SizingView.as_view(), name="api-sizing"),
    path("api/", include("fleet.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include((incidents_urls.urlpatterns, "incidents"), namespace="incidents")),
    path("", include((diagnostics_urls.urlpatterns, "diagnostics"), namespace="diagnostics")),
    path("", include("incidents.urls_drills")),
    path("admin/", admin.site.urls),
]
