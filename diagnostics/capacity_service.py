"""The scheduled capacity check at Django's edge: size every enabled vLLM instance from its
inventory record, read the load the probes saw, and keep the findings (open while found,
cleared when not, history kept).

The check runs with no reader, so its text is kept as messages (core.i18n) beside the English:
a finding's in `numbers["text"]`, why an instance could not be sized in `result["problem"]`.
Pages show them with CapacityFinding.shown_title / shown_detail / shown_fixes and
InstanceSizing.shown_problem, in the reader's language."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from core.i18n import Message, later
from diagnostics import sizing_service
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
    """The highest of each load series over the last hour (fleet.series names)."""
    points = MetricSample.objects.points(
        instances=[instance], names=_LOAD_SAMPLES, since=now - LOAD_WINDOW, until=now
    ).get(instance.pk, {})
    return ObservedLoad(**{_LOAD_SAMPLES[name]: max(v for _, v in rows) for name, rows in points.items()})


def check_instance(
    *, instance: Instance, now: datetime, specs: list[ModelSpec] | None = None
) -> list[Issue] | None:
    """Size one instance and store its findings; None when it cannot be sized (the reason is
    kept on its InstanceSizing)."""
    spec, model_key, missing = sizing_service.spec_for_instance(instance, specs=specs)
    problem: Message | str | None = _joined(missing)
    result, issues = None, None
    if spec is not None:
        try:
            sizing = sizing_service.size_spec(spec)
        except sizing_service.SizingInputError as exc:
            problem = exc.message
        else:
            result = sizing.to_dict()
            issues = check(sizing, observed_load(instance=instance, now=now))
    if result is None and problem:
        result = {"problem": problem.to_json() if isinstance(problem, Message) else problem}
    with transaction.atomic():
        InstanceSizing.objects.update_or_create(
            instance=instance,
            defaults={
                "checked_at": now,
                "model_key": model_key,
                "result": result,
                "problem": str(problem or "")[:300],
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
        finding.fix, finding.numbers, finding.last_seen = (
            issue.fix,
            {**issue.numbers, "text": issue.text()},
            now,
        )
        finding.save()
    for gone in open_by_code.values():
        gone.cleared_at = now
        gone.save(update_fields=["cleared_at"])


def _joined(problems: list[Message]) -> Message | None:
    """Several problems as one message, in the order found ("a; b")."""
    if not problems:
        return None
    joined = problems[0]
    for problem in problems[1:]:
        joined = later("%(first)s; %(second)s", first=joined, second=problem)
    return joined
