from django.urls import path

from fleet.views import agents, inventory, probing, transfer
from fleet.views.kinds import KINDS

app_name = "fleet"


def _kind_patterns(kind) -> list:
    p, s = kind.plural, kind.slug
    return [
        path(f"{p}/", inventory.ListView.as_view(kind=kind), name=f"{s}-list"),
        path(f"{p}/new/", inventory.EditView.as_view(kind=kind), name=f"{s}-create"),
        path(f"{p}/<int:pk>/", inventory.DetailView.as_view(kind=kind), name=f"{s}-detail"),
        path(f"{p}/<int:pk>/edit/", inventory.EditView.as_view(kind=kind), name=f"{s}-edit"),
        path(f"{p}/<int:pk>/delete/", inventory.DeleteView.as_view(kind=kind), name=f"{s}-delete"),
    ]


urlpatterns = [
    path("instances/<int:pk>/probe/", probing.probe_now, name="instance-probe"),
    path("instances/<int:pk>/charts/", probing.instance_charts, name="instance-charts"),
    path("instances/<int:pk>/state/", probing.instance_state, name="instance-state"),
    path("runs/<int:pk>/", probing.run_status, name="run-status"),
    path("instances/<int:pk>/host/", agents.instance_on_host_panel, name="instance-on-host"),
    path("hosts/<int:pk>/agent/", agents.agent_panel, name="host-agent"),
    path("hosts/<int:pk>/agent/enroll/", agents.enroll, name="host-agent-enroll"),
    path("hosts/<int:pk>/agent/rotate/", agents.rotate, name="host-agent-rotate"),
    path("export/", transfer.export_inventory, name="export"),
    path("import/", transfer.import_form, name="import"),
    path("import/preview/", transfer.import_preview, name="import-preview"),
    path("import/apply/", transfer.import_apply, name="import-apply"),
]
for _kind in KINDS:
    urlpatterns += _kind_patterns(_kind)
