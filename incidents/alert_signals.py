"""The values alert rules compare, per instance, from what the probes stored: the latest
samples (fresh ones only), the metrics probe's derived figures, the verdict, and the open
capacity findings."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Max

from diagnostics.models import CapacityFinding
from fleet.models import Instance, MetricSample

FRESH = timedelta(minutes=2)
SAMPLED = ("kv_cache_usage", "ttft_p99_s", "e2e_p99_s", "num_requests_waiting", "gpu_temperature_c")
SIGNALS = (*SAMPLED, "service_down", "error_rate", "kv_swap", "capacity_critical")


def values(instance: Instance, now: datetime) -> dict[str, float | None]:
    state = getattr(instance, "state", None)
    derived = (state.kind_result("metrics") or {}).get("derived", {}) if state else {}
    latest = dict(
        MetricSample.objects.filter(instance=instance, name__in=SAMPLED, ts__gte=now - FRESH, ts__lte=now)
        .values("name")
        .annotate(last=Max("ts"))
        .values_list("name", "last")
    )
    found: dict[str, float | None] = {name: None for name in SIGNALS}
    for name, ts in latest.items():
        found[name] = MetricSample.objects.filter(instance=instance, name=name, ts=ts).values_list(
            "value", flat=True
        )[0]
    for name in SAMPLED:
        if found[name] is None and name in derived:
            found[name] = derived[name]
    if state is not None:
        found["service_down"] = 1.0 if state.verdict == "down" else 0.0
    requests = derived.get("requests_per_s")
    if requests:
        found["error_rate"] = derived.get("request_errors_per_s", 0.0) / requests
    found["kv_swap"] = derived.get("cpu_cache_usage")  # the V0 (0.7) engine only
    found["capacity_critical"] = float(
        CapacityFinding.objects.filter(instance=instance, severity="critical").active().count()
    )
    return found
