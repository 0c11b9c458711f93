"""GPU state from NVIDIA's dcgm-exporter, for hosts without a console agent.

The GPU Operator runs dcgm-exporter on every GPU node (port 9400, /metrics). It prints one
Prometheus sample per DCGM field and GPU, labelled gpu="0", UUID="GPU-…" ("uuid" with
--use-old-namespace), pci_bus_id, device="nvidia0", modelName, Hostname ("hostname" in the
newest builds; none with --no-hostname), the counters CSV's "label" fields such as
DCGM_FI_DRIVER_VERSION, GPU_I_PROFILE / GPU_I_ID on MIG instances, and in Kubernetes
pod / namespace / container on copies of the rows of GPUs that pods hold.
`reading_from_dcgm` maps that text to the GpuState the NVML backends report:

  memory       DCGM reads NVML's v2 memory info, whose "used" leaves out the driver's reserved
               memory: total = FB_USED + FB_FREE + FB_RESERVED (or FB_TOTAL where exported) and
               used = total - free, as NVML's v1 call (the pynvml backend) counts it. Required.
  utilisation  DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_MEM_COPY_UTIL (%)
  temperature  DCGM_FI_DEV_GPU_TEMP (°C)
  power        DCGM_FI_DEV_POWER_USAGE (W); the limit DCGM_FI_DEV_ENFORCED_POWER_LIMIT, else
               DCGM_FI_DEV_POWER_MGMT_LIMIT (W), 0 when neither is exported
  clocks       DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_MAX_SM_CLOCK (MHz; 0 when not exported)
  throttling   DCGM_FI_DEV_CLOCKS_EVENT_REASONS (formerly DCGM_FI_DEV_CLOCK_THROTTLE_REASONS):
               NVML's bitmask, named as the pynvml backend names it
  violations   DCGM_FI_DEV_POWER_VIOLATION, DCGM_FI_DEV_THERMAL_VIOLATION: counters in ns
               (NVML's violationTime; exporters before 4.4.2 wrote "in us" in their HELP)
  XID          DCGM_EXP_XID_ERRORS_COUNT{xid=...} where enabled: the XIDs of the exporter's
               window; else DCGM_FI_DEV_XID_ERRORS, the last XID DCGM saw (0: none), whose
               err_msg label (exporter 3.3.6 on) is kept as the XID's message
  ECC          DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (uncorrected, since the driver loaded)
  row remap    DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS,
               DCGM_FI_DEV_ROW_REMAP_FAILURE, DCGM_FI_DEV_ROW_REMAP_PENDING

DCGM 4's new names for these fields (DCGM_FI_DEV_GPU_TEMP_CELSIUS, ...) are read as well.
A value DCGM marks blank (its sentinels, which exporters before 4.x print) counts as not
exported. Pod copies of a row give way to the GPU's own row; MIG instances' rows stand for
their GPU when it has none of its own (memory summed, the rest the highest). The sources of
these facts are listed in docs/host-agent.md.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from fleet.nvml.base import GpuState, NvmlError, NvmlReading
from fleet.nvml.pynvml_backend import cuda_version_text, throttle_reasons_from_mask
from fleet.probes.guarded_network import guarded

MAX_BYTES = 4 * 1024 * 1024
MAX_MESSAGE = 200  # characters of an XID's err_msg kept
MAX_LABEL = 255  # characters of the driver version and host name kept

# What a GpuState field is read from: its dcgm-exporter metric names, preferred first.
FIELDS: dict[str, tuple[str, ...]] = {
    "fb_used": ("DCGM_FI_DEV_FB_USED",),
    "fb_free": ("DCGM_FI_DEV_FB_FREE",),
    "fb_reserved": ("DCGM_FI_DEV_FB_RESERVED",),
    "fb_total": ("DCGM_FI_DEV_FB_TOTAL",),
    "sm_util": ("DCGM_FI_DEV_GPU_UTIL",),
    "mem_util": ("DCGM_FI_DEV_MEM_COPY_UTIL",),
    "temperature": ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"),
    "power": ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS"),
    "power_limit": (
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
        "DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS",
        "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        "DCGM_FI_DEV_BOARD_POWER_LIMIT_REQUESTED_WATTS",
    ),
    "sm_clock": ("DCGM_FI_DEV_SM_CLOCK",),
    "max_sm_clock": ("DCGM_FI_DEV_MAX_SM_CLOCK",),
    "clock_events": ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
    "power_violation": ("DCGM_FI_DEV_POWER_VIOLATION",),
    "thermal_violation": ("DCGM_FI_DEV_THERMAL_VIOLATION",),
    "xid": ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"),
    "xid_count": ("DCGM_EXP_XID_ERRORS_COUNT",),
    "ecc_dbe": ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
    "remap_uncorrectable": (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
    ),
    "remap_correctable": ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL"),
    "remap_failure": ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED"),
    "remap_pending": ("DCGM_FI_DEV_ROW_REMAP_PENDING",),
}
_WIRE = {name: (key, rank) for key, names in FIELDS.items() for rank, name in enumerate(names)}
_SUMMED_OVER_MIG = frozenset({"fb_used", "fb_free", "fb_reserved", "fb_total"})
# Labels that mark a copy of a GPU's row made for a pod, job or DRA claim holding it.
_ATTRIBUTION = frozenset(
    {"pod", "namespace", "container", "pod_uid", "vgpu", "pod_name", "pod_namespace", "container_name"}
    | {"hpc_job", "dra_claim_name", "dra_claim_namespace", "dra_driver_name", "dra_pool_name"}
    | {"dra_device_name", "dra_mig_profile", "dra_mig_device_uuid"}
)
# Rows of per-link and non-GPU entities, which also carry a gpu label or none at all.
_OTHER_ENTITIES = frozenset({"nvlink", "nvswitch", "cpu", "cpucore"})
# DCGM's "no value" sentinels: DCGM_INT32_BLANK, DCGM_INT64_BLANK and DCGM_FP64_BLANK, each
# plus 1..3 for not found / not supported / not permissioned (int64 ones all read as 2**63).
_INT32_BLANK, _FP64_BLANK = 0x7FFFFFF0, 2.0**47
_BLANKS = frozenset(
    {float(_INT32_BLANK + k) for k in range(4)} | {_FP64_BLANK + k for k in range(4)} | {float(2**63 - 16)}
)

# (field key, MIG instance id, xid) -> value
_Key = tuple[str, str, str]


@dataclass
class _Gpu:
    index: int
    labels: dict[str, str]
    own: dict[_Key, float] = field(default_factory=dict)  # the GPU's own rows, by key and rank
    own_rank: dict[_Key, int] = field(default_factory=dict)
    copies: dict[_Key, float] = field(default_factory=dict)  # pod copies: the highest value
    xid_message: str = ""


def reading_from_dcgm(text: str) -> NvmlReading:
    """The GPUs in a dcgm-exporter /metrics text. NvmlError saying what is wrong when it
    is too large, not Prometheus text, names a GPU twice or in a way that is not a GPU
    index, lacks the memory metrics, or holds no GPU at all."""
    if len(text) > MAX_BYTES:
        raise NvmlError(f"the exporter's text is {len(text)} characters, over the {MAX_BYTES} limit")
    gpus = _collect(text)
    if not gpus:
        raise NvmlError(
            "the text holds no GPU metrics (DCGM_FI_DEV_* samples with a gpu label): "
            "is this dcgm-exporter's /metrics, and does it see any GPU?"
        )
    _check_unique_uuids(gpus.values())
    first = gpus[min(gpus)].labels
    return NvmlReading(
        driver_version=first.get("DCGM_FI_DRIVER_VERSION", "")[:MAX_LABEL],
        cuda_version=_cuda(first.get("DCGM_FI_CUDA_DRIVER_VERSION", "")),
        gpus=tuple(_state(gpus[i]) for i in sorted(gpus)),
        hostname=(first.get("Hostname") or first.get("hostname", ""))[:MAX_LABEL],
    )


def _cuda(label: str) -> str:
    """DCGM_FI_CUDA_DRIVER_VERSION, where the counters CSV makes it a label: 12080 is "12.8"."""
    if label.isascii() and label.isdigit() and len(label) <= 9:
        return cuda_version_text(int(label))
    return label[:MAX_LABEL]


def _collect(text: str) -> dict[int, _Gpu]:
    gpus: dict[int, _Gpu] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                _take(gpus, _wire_name(family.type, sample.name), dict(sample.labels), float(sample.value))
    except NvmlError:
        raise
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise NvmlError(f"not Prometheus text: {exc}") from None
    return gpus


def _wire_name(kind: str, name: str) -> str:
    """The name as the exporter wrote it: prometheus_client adds "_total" to counters' samples."""
    bare = name.removesuffix("_total")
    return bare if kind == "counter" and bare in _WIRE else name


def _take(gpus: dict[int, _Gpu], name: str, labels: dict[str, str], value: float) -> None:
    wire = _WIRE.get(name)
    if wire is None or "gpu" not in labels or _OTHER_ENTITIES & labels.keys():
        return
    gpu = _gpu(gpus, name, labels)
    (key_name, rank), xid = wire, labels.get("xid", "")
    if key_name == "xid" and labels.get("err_msg"):
        gpu.xid_message = labels["err_msg"][:MAX_MESSAGE]
    if not math.isfinite(value) or value in _BLANKS:
        return
    key = (key_name, labels.get("GPU_I_ID", ""), xid)
    if _ATTRIBUTION & labels.keys():
        gpu.copies[key] = max(value, gpu.copies.get(key, value))
        return
    if gpu.own_rank.get(key) == rank:
        where = f"GPU {gpu.index}{_where(labels)}"
        raise NvmlError(f"{name} appears twice for {where}: two exporters' text joined?")
    if rank <= gpu.own_rank.get(key, rank):
        gpu.own[key], gpu.own_rank[key] = value, rank


def _where(labels: dict[str, str]) -> str:
    return f" (GPU instance {labels['GPU_I_ID']})" if labels.get("GPU_I_ID") else ""


def _gpu(gpus: dict[int, _Gpu], name: str, labels: dict[str, str]) -> _Gpu:
    raw = labels["gpu"]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 5:
        raise NvmlError(f'{name} has gpu="{raw[:40]}", not a GPU index')
    index = int(raw)
    gpu = gpus.setdefault(index, _Gpu(index=index, labels=labels))
    uuid, known = _uuid(labels), _uuid(gpu.labels)
    if uuid and known and uuid != known:
        raise NvmlError(f"GPU {index} appears twice, as {known} and {uuid}: two exporters' text joined?")
    if uuid and not known:
        gpu.labels = labels
    return gpu


def _uuid(labels: dict[str, str]) -> str:
    return labels.get("UUID") or labels.get("uuid", "")


def _check_unique_uuids(gpus: Iterable[_Gpu]) -> None:
    seen: dict[str, int] = {}
    for gpu in gpus:
        uuid = _uuid(gpu.labels)
        if uuid and uuid in seen:
            raise NvmlError(f"{uuid} appears as GPU {seen[uuid]} and as GPU {gpu.index}")
        seen.setdefault(uuid, gpu.index)


def _values(gpu: _Gpu) -> dict[tuple[str, str], float]:
    """(field, xid) -> value: the GPU's own rows over pod copies, MIG instances folded."""
    rows = gpu.copies | gpu.own
    whole = {(name, xid): v for (name, instance, xid), v in rows.items() if not instance}
    parts: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (name, instance, xid), v in rows.items():
        if instance and (name, xid) not in whole:
            parts[(name, xid)].append(v)
    folded = {k: sum(vs) if k[0] in _SUMMED_OVER_MIG else max(vs) for k, vs in parts.items()}
    return whole | folded


def _state(gpu: _Gpu) -> GpuState:
    values = _values(gpu)

    def get(name: str, default: float = 0) -> float:
        return values.get((name, ""), default)

    total, free = _memory(gpu.index, values)
    last_xid = int(get("xid"))
    xids = _xids(values, last_xid)
    told = tuple(gpu.xid_message if x == last_xid else "" for x in xids)
    labels = gpu.labels
    violation = {n: int(v) for n in ("power_violation", "thermal_violation") if (v := get(n, -1)) >= 0}
    return GpuState(
        index=gpu.index,
        uuid=_uuid(labels)[:MAX_LABEL],
        name=labels.get("modelName", "")[:MAX_LABEL],
        pci_bus_id=labels.get("pci_bus_id", "")[:MAX_LABEL],
        memory_total_mib=total,
        memory_used_mib=total - free,
        sm_utilization_pct=round(get("sm_util")),
        memory_utilization_pct=round(get("mem_util")),
        temperature_c=round(get("temperature")),
        power_draw_w=round(get("power"), 3),
        power_limit_w=round(get("power_limit"), 3),
        sm_clock_mhz=round(get("sm_clock")),
        max_sm_clock_mhz=round(get("max_sm_clock")),
        throttle_reasons=_reasons(get("clock_events")),
        xid_errors=xids,
        xid_messages=told if any(told) else (),
        ecc_uncorrected_volatile=int(get("ecc_dbe")),
        remapped_rows_uncorrectable=int(get("remap_uncorrectable")),
        remapped_rows_correctable=int(get("remap_correctable")),
        row_remap_failure=get("remap_failure") > 0,
        row_remap_pending=get("remap_pending") > 0,
        power_violation_ns=violation.get("power_violation"),
        thermal_violation_ns=violation.get("thermal_violation"),
    )


def _memory(index: int, values: dict[tuple[str, str], float]) -> tuple[int, int]:
    """(total, free) in MiB."""
    free = values.get(("fb_free", ""))
    used = values.get(("fb_used", ""))
    total = values.get(("fb_total", ""))
    if free is None or (used is None and total is None):
        raise NvmlError(
            f"GPU {index}: the exporter does not export DCGM_FI_DEV_FB_FREE and DCGM_FI_DEV_FB_USED "
            "(add them to its counters CSV)"
        )
    if total is None:
        total = used + free + values.get(("fb_reserved", ""), 0)
    return int(total), min(int(free), int(total))


def _xids(values: dict[tuple[str, str], float], last: int) -> tuple[int, ...]:
    """The window's XIDs where DCGM_EXP_XID_ERRORS_COUNT is exported, else the last XID."""
    counted = [(xid, v) for (name, xid), v in values.items() if name == "xid_count"]
    if counted:
        return tuple(sorted(int(xid) for xid, v in counted if xid.isascii() and xid.isdigit() and v > 0))
    return (last,) if last > 0 else ()


def _reasons(mask: float) -> tuple[str, ...]:
    """NVML's reason names for the bitmask; a value no 64-bit mask can hold names none."""
    return throttle_reasons_from_mask(int(mask)) if 0 <= mask < 2**64 else ()


class DcgmExporterBackend:
    """Reads a dcgm-exporter's /metrics: `url` is the full endpoint, e.g.
    http://gpu-node-01:9400/metrics. The whole read is bounded by `timeout` seconds (a
    hung or trickling exporter is cut off) and MAX_BYTES; any failure is an NvmlError
    naming the URL."""

    def __init__(self, url: str, *, timeout: float = 3.0) -> None:
        self.url, self.timeout = url, timeout

    def read(self) -> NvmlReading:
        try:
            body = self._fetch()
        except httpx.TimeoutException:
            raise NvmlError(f"dcgm-exporter {self.url} did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise NvmlError(f"dcgm-exporter {self.url} could not be read: {exc!r}") from None
        try:
            return reading_from_dcgm(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise NvmlError(f"dcgm-exporter {self.url} sent text that is not UTF-8: {exc}") from None
        except NvmlError as exc:
            raise NvmlError(f"dcgm-exporter {self.url}: {exc}") from None

    def _fetch(self) -> bytes:
        deadline = time.monotonic() + self.timeout
        with (
            guarded(httpx.Client(timeout=self.timeout, trust_env=False)) as client,
            client.stream("GET", self.url, headers={"Accept": "text/plain"}) as response,
        ):
            if response.status_code != 200:
                raise NvmlError(f"dcgm-exporter {self.url} answered HTTP {response.status_code}")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_BYTES:
                raise NvmlError(f"dcgm-exporter {self.url} declares {declared} bytes, over {MAX_BYTES}")
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_BYTES:
                    raise NvmlError(f"dcgm-exporter {self.url} sent more than {MAX_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise NvmlError(f"dcgm-exporter {self.url} did not finish within {self.timeout:g} s")
                chunks.append(chunk)
            return b"".join(chunks)
