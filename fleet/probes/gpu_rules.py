"""Findings from NVML: throttling, saturation, XID and ECC errors, row remapping, NUMA placement.

Thermal trouble is judged by NVML's clock throttle reasons; the temperature alone is a
hint (corrections #10: the guide says both 83 and 85 °C). SM utilisation above the
threshold (guide 2.2.2) is the explanation for slow TTFT or a queue, so it is degraded
only beside such a finding; a busy GPU with happy clients is what we pay for.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.translation import gettext_noop

from core.i18n import Message, later
from fleet.nvml.base import GpuState, ThrottleReason
from fleet.probes.evidence import joined
from fleet.probes.findings import Category, Finding, Severity, Thresholds
from fleet.probes.gpu import GpuProbeResult

THERMAL = frozenset({ThrottleReason.SW_THERMAL, ThrottleReason.HW_THERMAL, ThrottleReason.HW_SLOWDOWN})

XID_MEANINGS = {
    13: gettext_noop("graphics engine exception"),
    31: gettext_noop("GPU memory page fault"),
    43: gettext_noop("GPU stopped processing"),
    45: gettext_noop("preemptive cleanup"),
    48: gettext_noop("double-bit ECC error"),
    61: gettext_noop("micro-controller breakpoint"),
    62: gettext_noop("micro-controller halt"),
    63: gettext_noop("ECC page retirement or row remapping"),
    64: gettext_noop("row remapping failure"),
    74: gettext_noop("NVLink error"),
    79: gettext_noop("GPU has fallen off the bus"),
    92: gettext_noop("high single-bit ECC rate"),
    94: gettext_noop("contained ECC error"),
    95: gettext_noop("uncontained ECC error"),
    119: gettext_noop("GSP RPC timeout"),
    120: gettext_noop("GSP error"),
}
FATAL_XIDS = frozenset({48, 62, 64, 74, 79, 95, 119, 120})
SATURATION_COMPANIONS = frozenset({Category.TTFT, Category.QUEUE, Category.TPS})


def _clock(g: GpuState) -> Message:
    return later("SM clock %(clock)s of %(most)s MHz", clock=g.sm_clock_mhz, most=g.max_sm_clock_mhz)


def _thermal(g: GpuState, th: Thresholds) -> tuple[str, Severity, Message] | None:
    reasons = [r for r in g.throttle_reasons if r in THERMAL]
    if reasons:
        return (
            "gpu.thermal",
            "degraded",
            later(
                "GPU %(index)s: NVML reports %(reasons)s at %(temperature)s °C, %(clock)s",
                index=g.index,
                reasons=", ".join(reasons),
                temperature=g.temperature_c,
                clock=_clock(g),
            ),
        )
    if g.temperature_c >= th.temperature_c:
        return (
            "gpu.hot",
            "info",
            later(
                "GPU %(index)s at %(temperature)s °C ≥ %(limit)g °C, but NVML reports no thermal slowdown: "
                "a hint only",
                index=g.index,
                temperature=g.temperature_c,
                limit=th.temperature_c,
            ),
        )
    return None


def _power(g: GpuState, th: Thresholds) -> tuple[str, Severity, Message] | None:
    if ThrottleReason.HW_POWER_BRAKE in g.throttle_reasons:
        return (
            "gpu.power_brake",
            "degraded",
            later("GPU %(index)s: hardware power brake slowdown, %(clock)s", index=g.index, clock=_clock(g)),
        )
    if ThrottleReason.SW_POWER_CAP in g.throttle_reasons:
        return (
            "gpu.power_cap",
            "info",
            later(
                "GPU %(index)s at its power limit (%(draw).0f of %(limit).0f W), %(clock)s: normal under "
                "heavy load",
                index=g.index,
                draw=g.power_draw_w,
                limit=g.power_limit_w,
                clock=_clock(g),
            ),
        )
    return None


def _xid_named(xid: int, told: str = "") -> Message:
    """The XID and what it means: ours, else what the source said (dcgm-exporter's err_msg)."""
    meaning = XID_MEANINGS.get(xid)
    said = later(meaning) if meaning else (told or later("see NVIDIA XID catalogue"))
    return later("XID %(xid)s (%(meaning)s)", xid=xid, meaning=said)


def _xid(g: GpuState, th: Thresholds) -> tuple[str, Severity, Message] | None:
    if not g.xid_errors:
        return None
    told = g.xid_messages or ("",) * len(g.xid_errors)
    named = joined((_xid_named(x, m) for x, m in zip(g.xid_errors, told, strict=True)), sep=",")
    severity: Severity = "down" if FATAL_XIDS & set(g.xid_errors) else "degraded"
    return "gpu.xid", severity, later("GPU %(index)s: %(named)s", index=g.index, named=named)


def _ecc(g: GpuState, th: Thresholds) -> tuple[str, Severity, Message] | None:
    if g.ecc_uncorrected_volatile <= 0:
        return None
    return (
        "gpu.ecc",
        "degraded",
        later(
            "GPU %(index)s: %(count)s uncorrected ECC errors since the driver loaded",
            index=g.index,
            count=g.ecc_uncorrected_volatile,
        ),
    )


def _row_remap(g: GpuState, th: Thresholds) -> tuple[str, Severity, Message] | None:
    """Row remapping (A100 and later) repairs a bad memory row with a spare one. A pending
    remap takes effect at the next GPU reset, and work not touching the row runs on; a
    failed remap means a bank ran out of spares, which NVIDIA counts toward an RMA."""
    rows = later(
        "%(uncorrectable)s rows remapped for uncorrectable errors, %(correctable)s for correctable ones",
        uncorrectable=g.remapped_rows_uncorrectable,
        correctable=g.remapped_rows_correctable,
    )
    if g.row_remap_failure:
        return (
            "gpu.row_remap",
            "degraded",
            later(
                "GPU %(index)s: row remapping failed (%(rows)s): its memory cannot be repaired any more; "
                "drain it and have it serviced",
                index=g.index,
                rows=rows,
            ),
        )
    if g.row_remap_pending:
        return (
            "gpu.row_remap",
            "degraded",
            later(
                "GPU %(index)s: a row remap is pending (%(rows)s): drain the GPU and reset it to apply it",
                index=g.index,
                rows=rows,
            ),
        )
    return None


def _saturated(g: GpuState, th: Thresholds) -> tuple[str, Severity, Message] | None:
    if g.sm_utilization_pct <= th.sm_utilization_pct:
        return None
    return (
        "gpu.saturated",
        "info",
        later(
            "GPU %(index)s SM utilization %(pct)s %% > %(limit)g %%, so it is saturated",
            index=g.index,
            pct=g.sm_utilization_pct,
            limit=th.sm_utilization_pct,
        ),
    )


CATEGORY_BY_CODE = {
    "gpu.thermal": Category.THERMAL,
    "gpu.hot": Category.THERMAL,
    "gpu.power_brake": Category.POWER,
    "gpu.power_cap": Category.POWER,
    "gpu.xid": Category.XID,
    "gpu.ecc": Category.ECC,
    "gpu.row_remap": Category.ECC,
    "gpu.saturated": Category.SATURATED,
}
GPU_RULES = (_xid, _ecc, _row_remap, _thermal, _power, _saturated)


def _merge(parts: list[tuple[str, Severity, Message]], busy: bool) -> list[Finding]:
    """One finding per code; the evidence of several GPUs joined, the worst severity kept."""
    order = {"down": 0, "degraded": 1, "info": 2}
    merged: dict[str, tuple[Severity, list[Message]]] = {}
    for code, severity, text in parts:
        old_severity, texts = merged.get(code, (severity, []))
        merged[code] = (min(old_severity, severity, key=order.__getitem__), [*texts, text])
    return [
        Finding(
            code=code,
            category=CATEGORY_BY_CODE[code],
            source="gpu",
            evidence=joined(texts, sep=";") or "",
            severity="degraded" if code == "gpu.saturated" and busy else severity,
        )
        for code, (severity, texts) in merged.items()
    ]


def gpu_findings(
    gpus: GpuProbeResult | None,
    indices: Sequence[int] | None,
    th: Thresholds,
    numa: Sequence[Message | str] = (),
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
                evidence=later("NVML could not be read: %(error)s", error=gpus.error),
                source="gpu",
            ),
        ]
    mine = [g for g in gpus.reading.gpus if indices is None or g.index in indices]
    parts = [p for g in mine for rule in GPU_RULES if (p := rule(g, th)) is not None]
    slow = any(f.category in SATURATION_COMPANIONS and f.severity != "info" for f in busy)
    return found + _merge(parts, slow)
