"""The values alert rules compare, per instance, from what the probes stored: the latest
samples (fresh ones only), the metrics probe's derived figures, the verdict, and the open
capacity findings. Read for all instances of an evaluation at once: a few queries, not a
few per instance."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from diagnostics.models import CapacityFinding
from fleet.models import Instance, MetricSample

FRESH = timedelta(minutes=2)
SAMPLED = ("kv_cache_usage", "ttft_p99_s", "e2e_p99_s", "num_requests_waiting", "gpu_temperature_c")
SIGNALS = (*SAMPLED, "service_down", "error_rate", "kv_swap", "capacity_critical")


def values_for(instances: list[Instance], now: datetime) -> dict[int, dict[str, float | None]]:
    """Every signal of every instance, by instance id."""
    latest: dict[tuple[int, str], float] = {}
    rows = (
        MetricSample.objects.filter(
            instance__in=instances, name__in=SAMPLED, ts__gte=now - FRESH, ts__lte=now
        )
        .order_by("ts")
        .values_list("instance_id", "name", "value")
    )
    for instance_id, name, value in rows:  # in time order: the last one wins
        latest[(instance_id, name)] = value
    critical = Counter(
        CapacityFinding.objects.filter(instance__in=instances, severity="critical")
        .active()
        .values_list("instance_id", flat=True)
    )
    return {i.pk: _signals(i, latest, critical[i.pk]) for i in instances}


def _signals(
    instance: Instance, latest: dict[tuple[int, str], float], critical: int
) -> dict[str, float | None]:
    state = getattr(instance, "state", None)
    derived = (state.kind_result("metrics") or {}).get("derived", {}) if state else {}
    found: dict[str, float | None] = {
        name: latest.get((instance.pk, name), derived.get(name)) for name in SAMPLED
    }
    found["service_down"] = (1.0 if state.verdict == "down" else 0.0) if state is not None else None
    requests = derived.get("requests_per_s")
    found["error_rate"] = derived.get("request_errors_per_s", 0.0) / requests if requests else None
    found["kv_swap"] = derived.get("cpu_cache_usage")  # the V0 (0.7) engine only
    found["capacity_critical"] = float(critical)
    return found
