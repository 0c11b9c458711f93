"""The incidents' JSON API (part of the incidents namespace, which is served from the site's
root, so these live under /api/ beside the inventory's)."""

from django.urls import path

from incidents import api

urlpatterns = [
    path("api/incidents/<int:pk>/acknowledge/", api.acknowledge, name="api-acknowledge"),
]
