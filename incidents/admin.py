from django.contrib import admin

from incidents.models import AlertRule, Incident, MaintenanceWindow, NotificationTarget, ReceivedAlert


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "signal",
        "comparison",
        "threshold",
        "for_seconds",
        "category",
        "severity",
        "enabled",
    )
    list_editable = ("threshold", "for_seconds", "enabled")


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(admin.ModelAdmin):
    list_display = ("name", "host", "instance", "starts_at", "ends_at", "recurrence")


@admin.register(NotificationTarget)
class NotificationTargetAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "url", "min_severity", "enabled")


@admin.register(Incident)
class IncidentAdmin(admin.ModelAdmin):
    list_display = ("title", "category", "severity", "status", "started_at")
    list_filter = ("status", "severity", "category")


@admin.register(ReceivedAlert)
class ReceivedAlertAdmin(admin.ModelAdmin):
    list_display = ("alertname", "status", "fingerprint", "last_received", "times_received")


from incidents.models import DrillRun  # noqa: E402  (appended with the drills)


@admin.register(DrillRun)
class DrillRunAdmin(admin.ModelAdmin):
    list_display = ("scenario", "status", "passed", "created_by", "created_at", "finished_at")
    list_filter = ("status", "passed")
