from django.urls import path

from diagnostics.views import (
    configs,
    predeploy,
    sizing,
    sizing_host,
    sizing_hub,
    triage,
    troubleshoot,
    upgrades,
)

urlpatterns = [
    path("sizing/", sizing.page, name="sizing"),
    path("sizing/compare/", sizing.compare, name="sizing-compare"),
    path("sizing/models/new/", sizing.upload, name="sizing-upload"),
    path("sizing/models/hub/", sizing_hub.fetch, name="sizing-hub"),
    path("sizing/models/host/", sizing_host.from_host, name="sizing-host"),
    path("sizing/models/host/<slug:request_id>/", sizing_host.answer, name="sizing-host-answer"),
    path("sizing/instances/<int:pk>/", sizing.for_instance, name="sizing-instance"),
    path("configs/", configs.index, name="configs"),
    path("configs/nginx/lint/", configs.lint, name="config-lint"),
    path("configs/<slug:kind>/", configs.generator_page, name="config-generator"),
    path("configs/<slug:kind>/download/", configs.download, name="config-download"),
    path("upgrades/", upgrades.page, name="upgrade-diff"),
    path("upgrades/download/", upgrades.download, name="upgrade-diff-download"),
    path("hosts/<int:pk>/predeploy/", predeploy.host_panel, name="host-predeploy"),
    path("predeploy/<int:pk>/", predeploy.run_status, name="predeploy-run"),
    path("troubleshoot/", troubleshoot.index, name="troubleshoot"),
    path("troubleshoot/triage/", triage.triage, name="triage"),
    path("troubleshoot/triage/<int:pk>/", triage.run_page, name="triage-run"),
    path("troubleshoot/saved/<int:pk>/", troubleshoot.saved, name="walkthrough-saved"),
    path("troubleshoot/instances/<int:pk>/", troubleshoot.for_instance, name="troubleshoot-instance"),
    path("troubleshoot/<slug:tree_id>/", troubleshoot.walkthrough, name="walkthrough"),
    path("troubleshoot/<slug:tree_id>/save/", troubleshoot.save, name="walkthrough-save"),
]
