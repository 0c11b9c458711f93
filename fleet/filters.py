"""Filter sets for the inventory lists, shared by the pages and the API."""

from __future__ import annotations

import django_filters
from django import forms
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from fleet import gpu_catalog
from fleet.models import Engine, Gateway, GatewayKind, Gpu, GpuHost, Instance, MigMode

# Choices that are product names (GPU models, gateway kinds) stay as they are in any language.
_PRODUCT_NAMES = forms.Select(attrs={"translate": "no"})


class _SearchFilterSet(django_filters.FilterSet):
    search_fields: tuple[str, ...] = ()

    q = django_filters.CharFilter(method="search", label=_("Search"))

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        condition = Q()
        for term in value.split():
            term_q = Q()
            for field in self.search_fields:
                term_q |= Q(**{f"{field}__icontains": term})
            condition &= term_q
        return queryset.filter(condition).distinct()


class HostFilterSet(_SearchFilterSet):
    search_fields = ("name", "address", "datacenter", "rack", "os", "notes")
    datacenter = django_filters.CharFilter(lookup_expr="iexact", label=_("Datacenter"))
    tag = django_filters.CharFilter(method="filter_tag", label=_("Tag"))
    sort = django_filters.OrderingFilter(
        fields=(
            ("name", "name"),
            ("address", "address"),
            ("datacenter", "datacenter"),
            ("gpu_count", "gpus"),
            ("instance_count", "instances"),
            ("updated_at", "updated"),
        ),
    )

    class Meta:
        model = GpuHost
        fields = ["q", "datacenter", "tag"]

    def filter_tag(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        # JSON containment is not portable to SQLite, so match the stored list's text.
        return queryset.filter(tags__icontains=f'"{value}"')


class GpuFilterSet(_SearchFilterSet):
    search_fields = ("host__name", "uuid", "pci_bus_id", "model")
    host = django_filters.ModelChoiceFilter(
        queryset=GpuHost.objects.all(), to_field_name="name", label=_("Host")
    )
    model = django_filters.ChoiceFilter(
        choices=gpu_catalog.choices, label=pgettext_lazy("GPU", "Model"), widget=_PRODUCT_NAMES
    )
    mig_mode = django_filters.ChoiceFilter(choices=MigMode.choices, label=_("MIG mode"))
    sort = django_filters.OrderingFilter(
        fields=(("host__name", "host"), ("index", "index"), ("model", "model"), ("memory_mib", "memory")),
    )

    class Meta:
        model = Gpu
        fields = ["q", "host", "model", "mig_mode"]


class InstanceFilterSet(_SearchFilterSet):
    search_fields = ("name", "served_model_name", "base_url", "host__name", "engine_version")
    host = django_filters.ModelChoiceFilter(
        queryset=GpuHost.objects.all(), to_field_name="name", label=_("Host")
    )
    engine = django_filters.ChoiceFilter(choices=Engine.choices, label=_("Engine"))
    # A choice, not a BooleanFilter: its yes/no/"Unknown" select read as if state were unknown.
    # The values stay true/false, so API clients' ?enabled=true keeps working.
    enabled = django_filters.ChoiceFilter(
        choices=[("true", _("Enabled")), ("false", _("Disabled"))],
        empty_label=_("Any"),
        method="filter_enabled",
        label=pgettext_lazy("filter", "Enabled"),
    )
    sort = django_filters.OrderingFilter(
        fields=(
            ("name", "name"),
            ("host__name", "host"),
            ("engine", "engine"),
            ("served_model_name", "model"),
            ("updated_at", "updated"),
        ),
    )

    class Meta:
        model = Instance
        fields = ["q", "host", "engine", "enabled"]

    def filter_enabled(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(enabled=value == "true")


class GatewayFilterSet(_SearchFilterSet):
    search_fields = ("name", "url", "notes")
    kind = django_filters.ChoiceFilter(choices=GatewayKind.choices, label=_("Kind"), widget=_PRODUCT_NAMES)
    sort = django_filters.OrderingFilter(fields=(("name", "name"), ("kind", "kind"), ("url", "url")))

    class Meta:
        model = Gateway
        fields = ["q", "kind"]
