"""The scheduled capacity check at Django's edge: size every enabled vLLM instance from its
inventory record, read the load the probes saw, and keep the findings (open while found,
cleared when not, history kept)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max
from django.http import QueryDict
from django.utils import timezone

from diagnostics import sizing_service
from diagnostics.forms import SizingForm
from diagnostics.models import CapacityFinding, InstanceSizing, ModelSpec
from diagnostics.sizing.capacity import Issue, ObservedLoad, check
from fleet.models import Engine, Instance, MetricSample

LOAD_WINDOW = timedelta(hours=1)
_LOAD_SAMPLES = {
    "prompt_length_p95": "prompt_p95",
    "prompt_length_p99": "prompt_p99",
    "kv_cache_usage": "kv_usage_max",
    "num_requests_waiting": "waiting_max",
    "preemptions_per_s": "preemptions_per_s_max",
}


def check_fleet(*, now: datetime | None = None) -> dict[str, int]:
    """Check every enabled vLLM instance; counts of checked, unsized and open findings."""
    now = now or timezone.now()
    counts = {"checked": 0, "not_sized": 0, "open_findings": 0}
    specs = list(ModelSpec.objects.all())  # the catalogue once, not once per instance
    for instance in Instance.objects.enabled().filter(engine=Engine.VLLM).prefetch_related("gpus"):
        issues = check_instance(instance=instance, now=now, specs=specs)
        counts["checked"] += 1
        if issues is None:
            counts["not_sized"] += 1
        else:
            counts["open_findings"] += len(issues)
    return counts


def observed_load(*, instance: Instance, now: datetime) -> ObservedLoad:
    maxima = (
        MetricSample.objects.filter(instance=instance, name__in=_LOAD_SAMPLES, ts__gte=now - LOAD_WINDOW)
        .values("name")
        .annotate(top=Max("value"))
    )
    return ObservedLoad(**{_LOAD_SAMPLES[row["name"]]: row["top"] for row in maxima})


def check_instance(
    *, instance: Instance, now: datetime, specs: list[ModelSpec] | None = None
) -> list[Issue] | None:
    """Size one instance and store its findings; None when it cannot be sized (the reason is
    kept on its InstanceSizing)."""
    params, missing = sizing_service.params_for_instance(instance, specs=specs)
    query = QueryDict(mutable=True)
    query.update({k: str(v) for k, v in params.items()})
    form = SizingForm(query, specs=specs)
    problem, result, issues = "; ".join(missing), None, None
    if not problem and not form.is_valid():
        problem = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
    if not problem:
        try:
            sizing = sizing_service.run(form)
        except sizing_service.SizingInputError as exc:
            problem = str(exc)
        else:
            result = sizing.to_dict()
            issues = check(sizing, observed_load(instance=instance, now=now))
    with transaction.atomic():
        InstanceSizing.objects.update_or_create(
            instance=instance,
            defaults={
                "checked_at": now,
                "model_key": params.get("model", ""),
                "result": result,
                "problem": problem[:300],
            },
        )
        if issues is not None:
            _keep_findings(instance=instance, issues=issues, now=now)
    return issues


def _keep_findings(*, instance: Instance, issues: list[Issue], now: datetime) -> None:
    open_by_code = {
        f.code: f for f in CapacityFinding.objects.select_for_update().filter(instance=instance).active()
    }
    for issue in issues:
        finding = open_by_code.pop(issue.code, None) or CapacityFinding(
            instance=instance, code=issue.code, first_seen=now
        )
        finding.severity, finding.title, finding.detail = issue.severity, issue.title[:200], issue.detail
        finding.fix, finding.numbers, finding.last_seen = issue.fix, issue.numbers, now
        finding.save()
    for gone in open_by_code.values():
        gone.cleared_at = now
        gone.save(update_fields=["cleared_at"])
