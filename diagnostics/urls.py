from django.urls import path

from diagnostics.views import configs, sizing

urlpatterns = [
    path("sizing/", sizing.page, name="sizing"),
    path("sizing/compare/", sizing.compare, name="sizing-compare"),
    path("sizing/models/new/", sizing.upload, name="sizing-upload"),
    path("sizing/instances/<int:pk>/", sizing.for_instance, name="sizing-instance"),
    path("configs/", configs.index, name="configs"),
    path("configs/nginx/lint/", configs.lint, name="config-lint"),
    path("configs/<slug:kind>/", configs.generator_page, name="config-generator"),
    path("configs/<slug:kind>/download/", configs.download, name="config-download"),
]
