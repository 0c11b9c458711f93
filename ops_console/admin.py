from django.contrib import admin
from django.utils.translation import gettext_noop

from ops_console.models import WorkerHeartbeat


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["worker", "beat_at"]
    readonly_fields = ["worker", "beat_at"]


# Django 5.2's admin index labels its table for screen readers with these words, which its
# own Chinese catalogue does not have yet; ours (locale/) has them and comes first.
DJANGO_ADMIN_WORDS = [
    gettext_noop("Model name"),
    gettext_noop("Add link"),
    gettext_noop("Change or view list link"),
]
