"""The scheduled capacity check at Django's edge: size every enabled vLLM instance from its
inventory record, read the load the probes saw, and keep the findings (open while found,
cleared when not, history kept).

The check runs with no reader, so its text is kept as messages (core.i18n) beside the English:
a finding's in `numbers["text"]`, why an instance could not be sized in `result["problem"]`.
Pages show them with CapacityFinding.shown_title / shown_detail / shown_fixes and
InstanceSizing.shown_problem, in the reader's language.

The live sizing check (diagnostics/sizing/live_check.py) compares the prediction with the KV
cache the running engine reports (vllm:cache_config_info, read by the metrics probe); its
comparison is kept in `result["live"]`, and a drift is one more finding (live_sizing_drift)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from core.i18n import Message, later
from diagnostics import sizing_service
from diagnostics.models import CapacityFinding, InstanceSizing, ModelSpec
from diagnostics.sizing import live_check
from diagnostics.sizing.capacity import Issue, ObservedLoad, check
from fleet.models import Engine, Instance, InstanceState, MetricSample

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


def reported_cache(*, instance: Instance, now: datetime) -> live_check.Reported | None:
    """The KV cache the running engine reports (num_gpu_blocks, block_size,
    gpu_memory_utilization from vllm:cache_config_info): the latest stored samples of the last
    hour, else the latest stored scrape if it is that recent; None when neither has them."""
    latest = MetricSample.objects.latest_values(
        instances=[instance], names=live_check.REPORTED_NAMES, since=now - LOAD_WINDOW, until=now
    )
    values = {name: value for (_, name), value in latest.items()}
    if len(values) < len(live_check.REPORTED_NAMES):  # not every name is a stored series
        values = _from_last_scrape(instance=instance, now=now) | values
    return live_check.Reported.from_values(values)


def _from_last_scrape(*, instance: Instance, now: datetime) -> dict[str, float]:
    """The reported names among the gauges of the instance's stored scrape (fleet.probes.scrape
    reads cache_config_info's labels into them), when it was scraped within LOAD_WINDOW."""
    scrape = InstanceState.objects.filter(instance=instance).values_list("last_scrape", flat=True).first()
    if not isinstance(scrape, dict) or not isinstance(scrape.get("gauges"), dict):
        return {}
    stamp = scrape.get("timestamp")
    if not isinstance(stamp, int | float) or stamp < (now - LOAD_WINDOW).timestamp():
        return {}
    gauges = scrape["gauges"]
    return {name: gauges[name] for name in live_check.REPORTED_NAMES if name in gauges}


def _by_severity(issues: list[Issue]) -> list[Issue]:
    order = {"critical": 0, "warning": 1, "info": 2}
    return sorted(issues, key=lambda issue: order[issue.severity])


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
            reported = reported_cache(instance=instance, now=now)
            if reported is not None:
                live = live_check.compare(sizing, reported, version=instance.engine_version)
                result["live"] = live.to_dict()
                drift = live.issue()
                if drift is not None:
                    issues = _by_severity([*issues, drift])
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
