"""The Drills page's URLs: include("incidents.urls_drills") in ops_console/urls.py (namespace "drills")."""

from django.urls import path

from incidents.views import drills

app_name = "drills"

urlpatterns = [
    path("drills/", drills.index, name="index"),
    path("drills/run/", drills.start, name="start"),
    path("drills/runs/<int:pk>/", drills.run_page, name="run"),
]
