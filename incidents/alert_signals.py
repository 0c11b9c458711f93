"""The values alert rules compare, per instance, from what the probes stored: the latest
declared series (fresh ones only, fleet.series), the judgement (down, KV pressure) and the
open capacity findings. Read for all instances of an evaluation at once: a few queries,
not a few per instance."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from diagnostics.models import CapacityFinding
from fleet.models import Instance, MetricSample
from fleet.series import engine_values

FRESH = timedelta(minutes=2)
SAMPLED = (
    "kv_cache_usage", "ttft_p99_s", "e2e_p99_s", "num_requests_waiting", "gpu_temperature_c",
    "error_rate", "kv_swap",
)  # fmt: skip
# Requests waiting for capacity, where the engine tells them apart (vLLM's
# num_requests_waiting_by_reason): those waiting as "deferred" (a LoRA slot, a KV transfer)
# are not overload, so the waiting signal counts them out (docs/vllm-metrics-judgements.md).
CAPACITY_WAITS = "num_requests_waiting_capacity"
SIGNALS = (*SAMPLED, "service_down", "kv_pressure", "capacity_critical")


def values_for(instances: list[Instance], now: datetime) -> dict[int, dict[str, float | None]]:
    """Every signal of every instance, by instance id."""
    latest = MetricSample.objects.latest_values(
        instances=instances, names=(*SAMPLED, CAPACITY_WAITS), since=now - FRESH, until=now
    )
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
    stored = engine_values(derived)
    found: dict[str, float | None] = {
        name: latest.get((instance.pk, name), stored.get(name)) for name in SAMPLED
    }
    capacity = latest.get((instance.pk, CAPACITY_WAITS), stored.get(CAPACITY_WAITS))
    if capacity is not None:
        found["num_requests_waiting"] = capacity
    found["service_down"] = (1.0 if state.verdict == "down" else 0.0) if state is not None else None
    codes = {f.get("code") for f in state.findings} if state is not None else set()
    # The verdict's own KV rule (fleet.probes.metric_rules.kv_under_pressure): one answer.
    found["kv_pressure"] = (1.0 if "kv.pressure" in codes else 0.0) if state is not None else None
    found["capacity_critical"] = float(critical)
    return found
