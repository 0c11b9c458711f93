"""API serializers for the inventory: relations by natural key, validation by the models' own rules.

Each write builds an unsaved copy of the object and runs its full_clean(), so the API
accepts exactly what the forms accept; Django's errors come back as DRF field errors.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.fields import get_error_detail
from rest_framework.settings import api_settings

from core.i18n import shown
from fleet import gpu_names, sharing
from fleet.models import ChangeLogEntry, Gateway, Gpu, GpuHost, Instance, Verdict
from fleet.series import NAMES, SERIES

MAX_GPU_INDEX = 63
_FORM_ONLY_KEYS = {"csrfmiddlewaretoken"}  # posted by the browsable API's HTML forms


def drf_errors(exc: DjangoValidationError) -> dict[str, list[Any]]:
    """Django's errors keyed the way DRF keys them: `__all__` becomes `non_field_errors`."""
    detail = get_error_detail(exc)
    if not isinstance(detail, dict):
        return {api_settings.NON_FIELD_ERRORS_KEY: detail}
    return {
        (api_settings.NON_FIELD_ERRORS_KEY if key == NON_FIELD_ERRORS else key): errors
        for key, errors in detail.items()
    }


class _FullCleanSerializer(serializers.ModelSerializer):
    """Rejects unknown fields, then validates an unsaved candidate with the model's full_clean()."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # A field we do not know is refused, not dropped: a client sending `api_key`
        # must learn that it was not stored rather than believe it was.
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields) - _FORM_ONLY_KEYS)
            if unknown:
                raise serializers.ValidationError({name: [_("Unknown field.")] for name in unknown})
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        candidate = self._candidate(attrs)
        errors: dict[str, list[Any]] = {}
        for check in (candidate.full_clean, lambda: self.clean_relations(candidate, attrs)):
            try:
                check()
            except DjangoValidationError as exc:
                for key, messages in drf_errors(exc).items():
                    errors.setdefault(key, []).extend(messages)
        if errors:
            raise serializers.ValidationError(errors)
        # clean() normalises values (sorted tags, catalogue memory, trimmed URLs): keep its result.
        for name in self._writable_concrete_fields():
            attrs[name] = getattr(candidate, name)
        return attrs

    def clean_relations(self, candidate: models.Model, attrs: dict[str, Any]) -> None:
        """Check many-to-many values against the candidate; raise Django's ValidationError."""

    def _candidate(self, attrs: dict[str, Any]) -> models.Model:
        model = self.Meta.model
        many_to_many = {field.name for field in model._meta.many_to_many}
        plain = {name: value for name, value in attrs.items() if name not in many_to_many}
        if self.instance is None:
            return model(**plain)
        # Model.__getstate__ copies _state and its caches, so edits leave the original untouched.
        candidate = copy.copy(self.instance)
        for name, value in plain.items():
            setattr(candidate, name, value)
        return candidate

    def _writable_concrete_fields(self) -> list[str]:
        return [
            field.name
            for field in self.Meta.model._meta.concrete_fields
            if field.name in self.fields and not self.fields[field.name].read_only
        ]


class HostSerializer(_FullCleanSerializer):
    """A GPU host, with how many GPUs and instances it has."""

    url = serializers.HyperlinkedIdentityField(view_name="api-host-detail")
    tags = serializers.ListField(
        child=serializers.CharField(allow_blank=True), required=False, help_text="Free-form labels."
    )
    gpu_count = serializers.IntegerField(read_only=True)
    instance_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = GpuHost
        fields = [
            "id",
            "url",
            *GpuHost.EDITABLE_FIELDS,
            "gpu_count",
            "instance_count",
            "created_at",
            "updated_at",
        ]


class GpuModelField(serializers.CharField):
    """A catalogue GPU by key or by the name nvidia-smi / NVML prints; stored as the key."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=gpu_names.MAX_NAME_CHARS, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        gpu = gpu_names.find_gpu(text)
        if gpu is None:
            raise serializers.ValidationError(shown(gpu_names.unknown_gpu(text)))
        return gpu.key


class GpuSerializer(_FullCleanSerializer):
    """A GPU, identified by its host's name and its index on that host."""

    url = serializers.HyperlinkedIdentityField(view_name="api-gpu-detail")
    model = GpuModelField(
        help_text='A catalogue key ("h100-80gb") or the name nvidia-smi prints ("NVIDIA H100 80GB HBM3").'
    )
    host = serializers.SlugRelatedField(
        slug_field="name", queryset=GpuHost.objects.all(), help_text="The host's name."
    )
    nvlink_peers = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=MAX_GPU_INDEX),
        required=False,
        help_text="Indexes of the GPUs on the same host this one has NVLink to.",
    )

    class Meta:
        model = Gpu
        fields = ["id", "url", *Gpu.EDITABLE_FIELDS]


class GpuIndexesField(serializers.ListField):
    """An instance's GPUs as their indexes on the instance's host."""

    child = serializers.IntegerField(min_value=0, max_value=MAX_GPU_INDEX)

    def to_representation(self, data: Any) -> list[int]:
        return sorted(gpu.index for gpu in data.all())


class FindingSerializer(serializers.Serializer):
    """One open finding of the probes' latest judgement."""

    code = serializers.CharField(help_text="Taxonomy key, like process.not_started or queue.backlog.")
    category = serializers.CharField()
    severity = serializers.CharField(help_text="The verdict this finding alone would give.")
    evidence = serializers.CharField(help_text="What was measured, in words.")
    source = serializers.CharField(help_text="readiness, phases, stream, metrics or gpu.")


class HealthSerializer(serializers.Serializer):
    """The probes' verdict on an instance, read-only; what the instance page shows."""

    state = serializers.ChoiceField(
        choices=Verdict.choices,
        help_text="The stored verdict; unknown when never probed or disabled. failing: a down "
        "finding seen, not yet the runs in a row that make it down.",
    )
    label = serializers.CharField(help_text="The state as the pages word it, like 'failing 2x in a row'.")
    reason = serializers.CharField(help_text="The evidence of the first finding; empty when none.")
    since = serializers.DateTimeField(allow_null=True, help_text="When the verdict last changed.")
    failing_streak = serializers.IntegerField(help_text="Failed probe cycles in a row.")
    last_probe_at = serializers.DateTimeField(allow_null=True)
    findings = FindingSerializer(many=True, help_text="The open findings, most severe first.")

    def to_representation(self, instance: Instance) -> dict[str, Any]:
        state = getattr(instance, "state", None)  # the reverse one-to-one raises when missing
        findings = state.findings if state and instance.enabled else []
        return {
            "state": instance.verdict,
            "label": instance.state_label,
            "reason": findings[0].get("evidence", "") if findings else "",
            "since": serializers.DateTimeField().to_representation(state.since) if state else None,
            "failing_streak": state.consecutive_failures if state else 0,
            "last_probe_at": (
                serializers.DateTimeField().to_representation(state.last_probe_at)
                if state and state.last_probe_at
                else None
            ),
            "findings": FindingSerializer(findings, many=True).data,
        }


class InstanceSerializer(_FullCleanSerializer):
    """An inference engine instance; `api_key_env` is the name of a variable, never a key.

    Sharing a base URL or a GPU with another instance is refused (400, naming the other
    instances) unless `allow_shared` is true; an edit is refused only for sharing it adds.
    """

    url = serializers.HyperlinkedIdentityField(view_name="api-instance-detail")
    host = serializers.SlugRelatedField(
        slug_field="name", queryset=GpuHost.objects.all(), help_text="The host's name."
    )
    gpus = GpuIndexesField(
        required=False,
        help_text="Indexes of the GPUs on the instance's host; as many as tensor x pipeline "
        "parallel size, or none.",
    )
    allow_shared = serializers.BooleanField(
        write_only=True,
        required=False,
        default=False,
        help_text="Save even though another instance serves the same base URL or uses one of "
        "these GPUs (shared on purpose). Not stored.",
    )
    health = HealthSerializer(source="*", read_only=True)

    class Meta:
        model = Instance
        fields = [
            "id",
            "url",
            *Instance.EDITABLE_FIELDS,
            "allow_shared",
            "health",
            "created_at",
            "updated_at",
        ]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        allow_shared = attrs.pop("allow_shared", False)  # not a model field: keep it off the candidate
        attrs = super().validate(attrs)
        if not allow_shared:
            self._refuse_new_sharing(attrs)
        return attrs

    def _refuse_new_sharing(self, attrs: dict[str, Any]) -> None:
        saved = self.instance
        base_url = attrs.get("base_url", saved.base_url if saved else "")
        gpus = attrs["gpus"] if "gpus" in attrs else (list(saved.gpus.all()) if saved else [])
        after = sharing.sharing_of(base_url=base_url, gpus=gpus, exclude_pk=saved.pk if saved else None)
        if saved is not None:
            after = sharing.added_sharing(before=sharing.sharing_by_instance([saved])[saved.pk], after=after)
        if after:
            errors: dict[str, list[Any]] = dict(sharing.conflict_messages(after))
            errors[api_settings.NON_FIELD_ERRORS_KEY] = [
                _("Send allow_shared: true to save it shared on purpose.")
            ]
            raise serializers.ValidationError(errors)

    def clean_relations(self, candidate: models.Model, attrs: dict[str, Any]) -> None:
        assert isinstance(candidate, Instance)
        indexes = attrs.get("gpus")
        if indexes is not None:
            attrs["gpus"] = gpus = gpus_by_index(host=candidate.host, indexes=indexes)
        elif self.instance is not None:
            # Changing the host or the parallel sizes must still fit the GPUs already assigned.
            gpus = list(self.instance.gpus.all())
        else:
            gpus = []
        candidate.clean_gpus(gpus)


def _listed(indexes: list[int]) -> str:
    return ", ".join(map(str, indexes))


def gpus_by_index(*, host: GpuHost, indexes: list[int]) -> list[Gpu]:
    """The host's GPUs with these indexes; each index must be listed once and exist on the host."""
    repeated = sorted({i for i in indexes if indexes.count(i) > 1})
    if repeated:
        raise DjangoValidationError(
            {"gpus": _("GPU index %(indexes)s listed more than once.") % {"indexes": _listed(repeated)}}
        )
    found = {
        gpu.index: gpu for gpu in Gpu.objects.filter(host=host, index__in=indexes).select_related("host")
    }
    missing = [i for i in indexes if i not in found]
    if missing:
        raise DjangoValidationError(
            {
                "gpus": _("Host %(host)s has no GPU with index %(indexes)s.")
                % {"host": host.name, "indexes": _listed(missing)}
            }
        )
    return [found[i] for i in sorted(indexes)]


class GatewaySerializer(_FullCleanSerializer):
    """A gateway in front of instances, which it names."""

    # `url` is the gateway's own field (the URL clients call), so the hyperlink takes another name.
    api_url = serializers.HyperlinkedIdentityField(
        view_name="api-gateway-detail", help_text="This gateway in the API."
    )
    instances = serializers.SlugRelatedField(
        slug_field="name",
        many=True,
        required=False,
        queryset=Instance.objects.all(),
        help_text="Names of the instances behind the gateway.",
    )

    class Meta:
        model = Gateway
        fields = ["id", "api_url", *Gateway.EDITABLE_FIELDS, "created_at", "updated_at"]


class SamplesQuerySerializer(serializers.Serializer):
    """The samples route's query: which series (comma-separated or repeated) and how far back."""

    series = serializers.CharField(required=False, allow_blank=True, default="")
    minutes = serializers.IntegerField(required=False, default=60, min_value=1, max_value=7 * 24 * 60)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if hasattr(data, "getlist") and "series" in data:  # ?series=a&series=b as well as ?series=a,b
            data = {**data.dict(), "series": ",".join(data.getlist("series"))}
        return super().to_internal_value(data)

    def validate_series(self, value: str) -> list[str]:
        asked = {name.strip() for name in value.split(",") if name.strip()}
        unknown = sorted(asked - NAMES)
        if unknown:
            raise serializers.ValidationError(
                _("Unknown series: %(series)s.") % {"series": ", ".join(unknown)}
            )
        return [s.name for s in SERIES if not asked or s.name in asked]


class SampleSerializer(serializers.Serializer):
    series = serializers.CharField(help_text="The series name, as listed in fleet.series.")
    label = serializers.CharField()
    unit = serializers.CharField()
    kind = serializers.CharField(help_text="The probe kind that measures it: health, stream, metrics or gpu.")
    value = serializers.FloatField(help_text="The latest value seen since `since`.")


class SamplesSerializer(serializers.Serializer):
    """The latest value of each series asked for; a series with no value since `since` is left out."""

    since = serializers.DateTimeField()
    samples = SampleSerializer(many=True)


class ChangeLogEntrySerializer(serializers.ModelSerializer):
    """One create, edit or delete: `changes` maps each field to [before, after]."""

    class Meta:
        model = ChangeLogEntry
        fields = ["actor_name", "source", "action", "changes", "timestamp"]
        read_only_fields = fields
