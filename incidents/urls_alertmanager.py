"""The Alertmanager webhook receiver's URL (part of the incidents namespace)."""

from django.urls import path

from incidents.views import alertmanager

urlpatterns = [
    path("incidents/alertmanager/", alertmanager.receive, name="alertmanager"),
]
