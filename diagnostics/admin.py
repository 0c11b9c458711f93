from django.contrib import admin

from diagnostics.models import CapacityFinding, InstanceSizing, ModelSpec


@admin.register(ModelSpec)
class ModelSpecAdmin(admin.ModelAdmin):
    list_display = ("name", "key", "family", "hf_id", "params_total", "source", "updated_at")
    list_filter = ("family", "source")
    search_fields = ("name", "key", "hf_id")
    readonly_fields = ("created_at", "updated_at")


@admin.register(CapacityFinding)
class CapacityFindingAdmin(admin.ModelAdmin):
    list_display = ("instance", "severity", "title", "first_seen", "last_seen", "cleared_at")
    list_filter = ("severity", "code")
    search_fields = ("instance__name", "title")


@admin.register(InstanceSizing)
class InstanceSizingAdmin(admin.ModelAdmin):
    list_display = ("instance", "model_key", "checked_at", "problem")
    search_fields = ("instance__name",)
