from django.contrib import admin

from ops_console.models import WorkerHeartbeat


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["worker", "beat_at"]
    readonly_fields = ["worker", "beat_at"]
