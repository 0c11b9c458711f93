from django.urls import path

from diagnostics.views import sizing

urlpatterns = [
    path("sizing/", sizing.page, name="sizing"),
    path("sizing/compare/", sizing.compare, name="sizing-compare"),
    path("sizing/models/new/", sizing.upload, name="sizing-upload"),
    path("sizing/instances/<int:pk>/", sizing.for_instance, name="sizing-instance"),
]
