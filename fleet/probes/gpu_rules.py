"""Findings from NVML: throttling, saturation, XID and ECC errors, NUMA placement.

Thermal trouble is judged by NVML's clock throttle reasons; the temperature alone is a
hint (corrections #10: the guide says both 83 and 85 °C). SM utilisation above the
threshold (guide 2.2.2) is the explanation for slow TTFT or a queue, so it is degraded
only beside such a finding; a busy GPU with happy clients is what we pay for.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet.nvml.base import GpuState, ThrottleReason
from fleet.probes.findings import Category, Finding, Severity, Thresholds
from fleet.probes.gpu import GpuProbeResult

THERMAL = frozenset({ThrottleReason.SW_THERMAL, ThrottleReason.HW_THERMAL, ThrottleReason.HW_SLOWDOWN})

XID_MEANINGS = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup",
    48: "double-bit ECC error",
    61: "micro-controller breakpoint",
    62: "micro-controller halt",
    63: "ECC page retirement or row remapping",
    64: "row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
FATAL_XIDS = frozenset({48, 62, 64, 74, 79, 95, 119, 120})
SATURATION_COMPANIONS = frozenset({Category.TTFT, Category.QUEUE, Category.TPS})


def _clock(g: GpuState) -> str:
    return f"SM clock {g.sm_clock_mhz} of {g.max_sm_clock_mhz} MHz"


def _thermal(g: GpuState, th: Thresholds) -> tuple[str, Severity, str] | None:
    reasons = [r for r in g.throttle_reasons if r in THERMAL]
    if reasons:
        return (
            "gpu.thermal",
            "degraded",
            f"GPU {g.index}: NVML reports {', '.join(reasons)} at {g.temperature_c} °C, {_clock(g)}",
        )
    if g.temperature_c >= th.temperature_c:
        return (
            "gpu.hot",
            "info",
            f"GPU {g.index} at {g.temperature_c} °C ≥ {th.temperature_c:g} °C, but NVML reports "
            "no thermal slowdown: a hint only",
        )
    return None


def _power(g: GpuState, th: Thresholds) -> tuple[str, Severity, str] | None:
    if ThrottleReason.HW_POWER_BRAKE in g.throttle_reasons:
        return "gpu.power_brake", "degraded", f"GPU {g.index}: hardware power brake slowdown, {_clock(g)}"
    if ThrottleReason.SW_POWER_CAP in g.throttle_reasons:
        return (
            "gpu.power_cap",
            "info",
            f"GPU {g.index} at its power limit ({g.power_draw_w:.0f} of "
            f"{g.power_limit_w:.0f} W), {_clock(g)}: normal under heavy load",
        )
    return None


def _xid(g: GpuState, th: Thresholds) -> tuple[str, Severity, str] | None:
    if not g.xid_errors:
        return None
    named = ", ".join(f"XID {x} ({XID_MEANINGS.get(x, 'see NVIDIA XID catalogue')})" for x in g.xid_errors)
    severity: Severity = "down" if FATAL_XIDS & set(g.xid_errors) else "degraded"
    return "gpu.xid", severity, f"GPU {g.index}: {named}"


def _ecc(g: GpuState, th: Thresholds) -> tuple[str, Severity, str] | None:
    if g.ecc_uncorrected_volatile <= 0:
        return None
    return (
        "gpu.ecc",
        "degraded",
        f"GPU {g.index}: {g.ecc_uncorrected_volatile} uncorrected ECC errors since the driver loaded",
    )


def _saturated(g: GpuState, th: Thresholds) -> tuple[str, Severity, str] | None:
    if g.sm_utilization_pct <= th.sm_utilization_pct:
        return None
    return (
        "gpu.saturated",
        "info",
        f"GPU {g.index} SM utilization {g.sm_utilization_pct} % > {th.sm_utilization_pct:g} %, "
        "so it is saturated",
    )


CATEGORY_BY_CODE = {
    "gpu.thermal": Category.THERMAL,
    "gpu.hot": Category.THERMAL,
    "gpu.power_brake": Category.POWER,
    "gpu.power_cap": Category.POWER,
    "gpu.xid": Category.XID,
    "gpu.ecc": Category.ECC,
    "gpu.saturated": Category.SATURATED,
}
GPU_RULES = (_xid, _ecc, _thermal, _power, _saturated)


def _merge(parts: list[tuple[str, Severity, str]], busy: bool) -> list[Finding]:
    """One finding per code; the evidence of several GPUs joined, the worst severity kept."""
    order = {"down": 0, "degraded": 1, "info": 2}
    merged: dict[str, tuple[Severity, list[str]]] = {}
    for code, severity, text in parts:
        old_severity, texts = merged.get(code, (severity, []))
        merged[code] = (min(old_severity, severity, key=order.__getitem__), [*texts, text])
    return [
        Finding(
            code=code,
            category=CATEGORY_BY_CODE[code],
            source="gpu",
            evidence="; ".join(texts),
            severity="degraded" if code == "gpu.saturated" and busy else severity,
        )
        for code, (severity, texts) in merged.items()
    ]


def gpu_findings(
    gpus: GpuProbeResult | None,
    indices: Sequence[int] | None,
    th: Thresholds,
    numa: Sequence[str] = (),
    busy: Sequence[Finding] = (),
) -> list[Finding]:
    """GPU findings for the instance's GPUs (all when indices is None). `busy` are the
    other findings: saturation is degraded beside a TTFT, TPS or queue finding."""
    found = [
        Finding(code="gpu.numa", category=Category.NUMA, severity="info", evidence=m, source="gpu")
        for m in numa
    ]
    if gpus is None:
        return found
    if gpus.reading is None:
        return [
            *found,
            Finding(
                code="gpu.read_failed",
                category=Category.PROBE_ERROR,
                severity="info",
                evidence=f"NVML could not be read: {gpus.error}",
                source="gpu",
            ),
        ]
    mine = [g for g in gpus.reading.gpus if indices is None or g.index in indices]
    parts = [p for g in mine for rule in GPU_RULES if (p := rule(g, th)) is not None]
    slow = any(f.category in SATURATION_COMPANIONS and f.severity != "info" for f in busy)
    return found + _merge(parts, slow)
