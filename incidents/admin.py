from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from incidents.models import (
    AlertDelivery,
    AlertRule,
    Incident,
    MaintenanceWindow,
    NotificationTarget,
    ReceivedAlert,
)


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


BODY_SHOWN_CHARS = 20_000


@admin.register(AlertDelivery)
class AlertDeliveryAdmin(admin.ModelAdmin):
    """Alertmanager's payloads as they arrived, and whether a worker has processed them:
    read-only, since the worker and the sweep are the only writers."""

    list_display = ("received_at", "alert_count", "processed_at", "attempts", "error")
    list_filter = (("processed_at", admin.EmptyFieldListFilter),)
    date_hierarchy = "received_at"
    fields = (
        "received_at", "alert_count", "group_key", "processed_at", "attempts", "last_attempt_at",
        "last_error", "outcome", "payload",
    )  # fmt: skip
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[AlertDelivery]:
        # A body may be 5 MB: the list leaves it out, a delivery's own page reads it.
        return super().get_queryset(request).defer("body")

    @admin.display(description=_("error"))
    def error(self, delivery: AlertDelivery) -> str:
        return Truncator(delivery.last_error).chars(80)

    @admin.display(description=_("payload"))
    def payload(self, delivery: AlertDelivery) -> str:
        text = bytes(delivery.body).decode(errors="replace")
        return format_html("<pre>{}</pre>", Truncator(text).chars(BODY_SHOWN_CHARS))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AlertDelivery | None = None) -> bool:
        return False
