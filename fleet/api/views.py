"""API viewsets for the inventory: one shared flow, every write logged with source "api"."""

from __future__ import annotations

from datetime import timedelta

from django.db import models, transaction
from django.db.models import Prefetch
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from fleet.api.serializers import (
    ChangeLogEntrySerializer,
    GatewaySerializer,
    GpuSerializer,
    HostSerializer,
    InstanceSerializer,
    SamplesQuerySerializer,
    SamplesSerializer,
)
from fleet.change_tracking import delete_with_log, record_create, record_update, snapshot
from fleet.filters import GatewayFilterSet, GpuFilterSet, HostFilterSet, InstanceFilterSet
from fleet.models import ChangeLogEntry, Gateway, Gpu, GpuHost, Instance, MetricSample
from fleet.series import BY_NAME, SERIES

SOURCE = "api"


class _InventoryViewSet(viewsets.ModelViewSet):
    # The FilterSets alone, so ?q= and ?sort= mean what they mean on the pages.
    filter_backends = [DjangoFilterBackend]

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        with transaction.atomic():
            obj = serializer.save()
            record_create(obj, actor=self.request.user, source=SOURCE)
        serializer.instance = self._reloaded(obj)

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        before = snapshot(serializer.instance)
        with transaction.atomic():
            obj = serializer.save()
            record_update(obj, before=before, actor=self.request.user, source=SOURCE)
        serializer.instance = self._reloaded(obj)

    def perform_destroy(self, instance: models.Model) -> None:
        delete_with_log(instance, actor=self.request.user, source=SOURCE)

    def _reloaded(self, obj: models.Model) -> models.Model:
        # Read back through the list queryset, so the reply has the counts and relations a row has.
        return self.get_queryset().get(pk=obj.pk)

    @extend_schema(
        summary="The change log of one object, newest first.", responses=ChangeLogEntrySerializer(many=True)
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def changes(self, request: Request, pk: str | None = None) -> Response:
        entries = ChangeLogEntry.objects.for_object(self.get_object())
        page = self.paginate_queryset(entries)
        return self.get_paginated_response(ChangeLogEntrySerializer(page, many=True).data)


class HostViewSet(_InventoryViewSet):
    """GPU hosts, with how many GPUs and instances each has."""

    # Meta.ordering does not apply to the GROUP BY the counts need, so order explicitly.
    queryset = GpuHost.objects.with_counts().order_by("name")
    serializer_class = HostSerializer
    filterset_class = HostFilterSet


class GpuViewSet(_InventoryViewSet):
    """GPUs, each on one host, named by the host's name and the GPU's index."""

    queryset = Gpu.objects.select_related("host")
    serializer_class = GpuSerializer
    filterset_class = GpuFilterSet


class InstanceViewSet(_InventoryViewSet):
    """Inference engine instances; `api_key_env` names a variable, the key is never stored."""

    queryset = Instance.objects.select_related("host", "state").prefetch_related(
        Prefetch("gpus", queryset=Gpu.objects.select_related("host"))
    )
    serializer_class = InstanceSerializer
    filterset_class = InstanceFilterSet

    @extend_schema(
        summary="The latest value of each stored metric series of one instance.",
        parameters=[
            OpenApiParameter(
                "series",
                OpenApiTypes.STR,
                description="Series names, comma-separated or repeated; all when omitted. "
                f"Known: {', '.join(s.name for s in SERIES)}.",
            ),
            OpenApiParameter(
                "minutes",
                OpenApiTypes.INT,
                description="How far back to look for a value (1 to 10080; default 60).",
            ),
        ],
        responses=SamplesSerializer,
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def samples(self, request: Request, pk: str | None = None) -> Response:
        query = SamplesQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        names, minutes = query.validated_data["series"], query.validated_data["minutes"]
        instance = self.get_object()
        since = timezone.now() - timedelta(minutes=minutes)
        latest = MetricSample.objects.latest_values(instances=[instance], names=names, since=since)
        rows = [
            {"series": s.name, "label": s.label, "unit": s.unit, "kind": s.kind.value, "value": value}
            for s in (BY_NAME[n] for n in names)
            if (value := latest.get((instance.pk, s.name))) is not None
        ]
        return Response(SamplesSerializer({"since": since, "samples": rows}).data)


class GatewayViewSet(_InventoryViewSet):
    """Gateways in front of instances."""

    queryset = Gateway.objects.prefetch_related("instances")
    serializer_class = GatewaySerializer
    filterset_class = GatewayFilterSet
