"""The guide's alert rule set (5.3.2), corrected (seed-notes #5, #11), plus the scheduled
capacity check's critical findings; copied into the database, where thresholds and
durations are edited in the admin."""

DEFAULT_RULES = (
    # key, name, signal, comparison, threshold, for_seconds, category, severity, description
    ("kv_cache_high", "KV cache above 95 %", "kv_cache_usage", "above", 0.95, 120, "oom.kv_pressure", "major",
     "KV usage near full is normal under load; it matters with waiting requests and preemptions."),
    ("service_down", "Service down", "service_down", "above", 0.5, 60, "process.not_started", "critical",
     "The probes judge the instance down."),
    ("error_rate_high", "Error rate above 5 %", "error_rate", "above", 0.05, 300, "server.5xx", "critical",
     "Requests finishing with abort or error (there is no vllm:request_failure_total)."),
    ("ttft_p99_high", "TTFT p99 above 5 s", "ttft_p99_s", "above", 5.0, 300, "timeout.ttft", "major", ""),
    ("queue_backlog", "More than 50 requests waiting", "num_requests_waiting", "above", 50, 180,
     "rate_limit.queue", "major", ""),
    ("gpu_temperature_high", "GPU above 83 °C", "gpu_temperature_c", "above", 83, 300, "gpu.thermal", "minor",
     "A hint; NVML's throttle reasons are the evidence."),
    ("kv_swap", "KV cache swapped to CPU (vLLM 0.7)", "kv_swap", "above", 0, 300, "oom.kv_pressure", "minor",
     "Only the V0 engine swaps; V1 preempts and recomputes."),
    ("e2e_p99_high", "End-to-end p99 above 30 s", "e2e_p99_s", "above", 30.0, 300, "timeout.tps", "major",
     ""),
    ("capacity_critical", "Critical capacity finding", "capacity_critical", "above", 0, 0, "oom.kv_pressure",
     "major", "The scheduled sizing found the flags cannot start or long prompts exhaust the KV cache."),
)  # fmt: skip


def seed_rules(alert_rule) -> int:  # noqa: ANN001  (the model class, or a migration's historical one)
    present = set(alert_rule.objects.values_list("key", flat=True))
    fields = (
        "key",
        "name",
        "signal",
        "comparison",
        "threshold",
        "for_seconds",
        "category",
        "severity",
        "description",
    )
    missing = [
        alert_rule(**dict(zip(fields, row, strict=True))) for row in DEFAULT_RULES if row[0] not in present
    ]
    alert_rule.objects.bulk_create(missing)
    return len(missing)
