"""The four inventory kinds the generic views serve, each described once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django import forms
from django.db import models
from django.utils.translation import gettext_lazy as _
from django_filters import FilterSet

from fleet import filters
from fleet.forms import GatewayForm, GpuForm, HostForm, InstanceForm
from fleet.models import Gateway, Gpu, GpuHost, Instance


@dataclass(frozen=True, kw_only=True)
class Kind:
    slug: str
    plural: str
    singular_label: str  # the labels are lazy translations
    plural_label: str
    plural_noun: str  # mid-sentence: "3 of 7 GPU hosts"
    model: type[models.Model]
    form_class: type[forms.ModelForm]
    filterset_class: type[FilterSet]
    queryset: Callable[[], models.QuerySet]
    detail_queryset: Callable[[], models.QuerySet]

    @property
    def template_dir(self) -> str:
        return f"fleet/{self.plural}"


HOSTS = Kind(
    slug="host",
    plural_noun=_("GPU hosts"),
    plural="hosts",
    singular_label=_("GPU host"),
    plural_label=_("GPU hosts"),
    model=GpuHost,
    form_class=HostForm,
    filterset_class=filters.HostFilterSet,
    queryset=lambda: GpuHost.objects.with_counts(),
    detail_queryset=lambda: GpuHost.objects.prefetch_related("gpus", "instances__gpus"),
)
GPUS = Kind(
    slug="gpu",
    plural_noun=_("GPUs"),
    plural="gpus",
    singular_label=_("GPU"),
    plural_label=_("GPUs"),
    model=Gpu,
    form_class=GpuForm,
    filterset_class=filters.GpuFilterSet,
    queryset=lambda: Gpu.objects.select_related("host").prefetch_related("instances"),
    detail_queryset=lambda: Gpu.objects.select_related("host").prefetch_related("instances"),
)
INSTANCES = Kind(
    slug="instance",
    plural_noun=_("instances"),
    plural="instances",
    singular_label=_("inference instance"),
    plural_label=_("Inference instances"),
    model=Instance,
    form_class=InstanceForm,
    filterset_class=filters.InstanceFilterSet,
    queryset=lambda: Instance.objects.select_related("host").prefetch_related("gpus"),
    detail_queryset=lambda: Instance.objects.select_related("host").prefetch_related("gpus", "gateways"),
)
GATEWAYS = Kind(
    slug="gateway",
    plural_noun=_("gateways"),
    plural="gateways",
    singular_label=_("gateway"),
    plural_label=_("Gateways"),
    model=Gateway,
    form_class=GatewayForm,
    filterset_class=filters.GatewayFilterSet,
    queryset=lambda: Gateway.objects.prefetch_related("instances"),
    detail_queryset=lambda: Gateway.objects.prefetch_related("instances__host"),
)

KINDS = (HOSTS, GPUS, INSTANCES, GATEWAYS)
