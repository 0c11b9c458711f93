from django.contrib import admin
from django.shortcuts import redirect
from django.urls import reverse

from fleet import change_tracking
from fleet.models import ChangeLogEntry, Gateway, Gpu, GpuHost, Instance, ProbeSettings


class ChangeLoggedAdmin(admin.ModelAdmin):
    """Edits made in the admin land in the same change log as everywhere else."""

    def save_model(self, request, obj, form, change):
        # The snapshot is kept on the request: a ModelAdmin instance serves every request.
        request._fleet_before = change_tracking.snapshot(type(obj).objects.get(pk=obj.pk)) if change else None
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        before = getattr(request, "_fleet_before", None)
        if before is None:
            change_tracking.record_create(form.instance, actor=request.user, source="admin")
        else:
            change_tracking.record_update(form.instance, before=before, actor=request.user, source="admin")

    def delete_model(self, request, obj):
        change_tracking.delete_with_log(obj, actor=request.user, source="admin")

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            change_tracking.delete_with_log(obj, actor=request.user, source="admin")


@admin.register(GpuHost)
class GpuHostAdmin(ChangeLoggedAdmin):
    list_display = ["name", "address", "datacenter", "rack", "driver_version", "cuda_version"]
    search_fields = ["name", "address"]


@admin.register(Gpu)
class GpuAdmin(ChangeLoggedAdmin):
    list_display = ["__str__", "model", "memory_mib", "numa_node", "mig_mode"]
    list_filter = ["model"]


@admin.register(Instance)
class InstanceAdmin(ChangeLoggedAdmin):
    list_display = ["name", "host", "engine", "engine_version", "served_model_name", "enabled"]
    list_filter = ["engine", "enabled"]
    search_fields = ["name", "served_model_name"]
    filter_horizontal = ["gpus"]


@admin.register(Gateway)
class GatewayAdmin(ChangeLoggedAdmin):
    list_display = ["name", "kind", "url"]
    filter_horizontal = ["instances"]


@admin.register(ChangeLogEntry)
class ChangeLogEntryAdmin(admin.ModelAdmin):
    list_display = ["timestamp", "object_repr", "action", "actor_name", "source"]
    list_filter = ["action", "source", "content_type"]
    readonly_fields = [f.name for f in ChangeLogEntry._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ProbeSettings)
class ProbeSettingsAdmin(admin.ModelAdmin):
    """One row of thresholds and limits: the list leads straight to it; nobody adds a second
    or deletes the one the probes read."""

    def has_add_permission(self, request):
        return not ProbeSettings.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        settings = ProbeSettings.current()
        return redirect(reverse("admin:fleet_probesettings_change", args=[settings.pk]))
