"""GPU state read from NVIDIA's dcgm-exporter: its text mapped to the NVML GpuState, bad
text refused with a clear NvmlError, and the backend over real HTTP servers."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from fleet.nvml.base import NvmlError
from fleet.nvml.dcgm import MAX_BYTES, DcgmExporterBackend, reading_from_dcgm
from fleet.nvml.simulated_backend import nvml_backend_for
from fleet.probes.findings import Category, Thresholds
from fleet.probes.gpu import read_gpus
from fleet.probes.gpu_rules import gpu_findings
from tests.probes.servers import app, closed_port_url, hang, huge, not_http, respond, serve, trickle

UUID0 = "GPU-5fd4e0a1-7c3b-4e0e-9d55-2b8c0a6f1e01"
UUID1 = "GPU-9a1c2d3e-4b5f-4a6b-8c7d-0e1f2a3b4c02"


def _ids(gpu: int, uuid: str, bus: str, extra: str = "") -> str:
    return (
        f'gpu="{gpu}",UUID="{uuid}",pci_bus_id="{bus}",device="nvidia{gpu}",'
        f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-07",DCGM_FI_DRIVER_VERSION="570.133.20"{extra}'
    )


G0 = _ids(0, UUID0, "00000000:18:00.0")
G1 = _ids(1, UUID1, "00000000:2A:00.0")

# What dcgm-exporter 4.4 prints for two H100s with its default counters, the violation,
# ECC, max-clock, power-limit and clock-event fields enabled, and a profiling field.
EXPORTER_TEXT = f"""\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{{{G0}}} 1980
DCGM_FI_DEV_SM_CLOCK{{{G1}}} 1095
# HELP DCGM_FI_DEV_MAX_SM_CLOCK Maximum SM clock (in MHz).
# TYPE DCGM_FI_DEV_MAX_SM_CLOCK gauge
DCGM_FI_DEV_MAX_SM_CLOCK{{{G0}}} 1980
DCGM_FI_DEV_MAX_SM_CLOCK{{{G1}}} 1980
# HELP DCGM_FI_DEV_MEM_CLOCK Memory clock frequency (in MHz).
# TYPE DCGM_FI_DEV_MEM_CLOCK gauge
DCGM_FI_DEV_MEM_CLOCK{{{G0}}} 2619
DCGM_FI_DEV_MEM_CLOCK{{{G1}}} 2619
# HELP DCGM_FI_DEV_MEMORY_TEMP Memory temperature (in C).
# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge
DCGM_FI_DEV_MEMORY_TEMP{{{G0}}} 48
DCGM_FI_DEV_MEMORY_TEMP{{{G1}}} 71
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{{{G0}}} 61
DCGM_FI_DEV_GPU_TEMP{{{G1}}} 89
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{{G0}}} 512.318000
DCGM_FI_DEV_POWER_USAGE{{{G1}}} 698.901000
# HELP DCGM_FI_DEV_ENFORCED_POWER_LIMIT Effective power limit (in W).
# TYPE DCGM_FI_DEV_ENFORCED_POWER_LIMIT gauge
DCGM_FI_DEV_ENFORCED_POWER_LIMIT{{{G0}}} 700.000000
DCGM_FI_DEV_ENFORCED_POWER_LIMIT{{{G1}}} 700.000000
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{G0}}} 91834211057
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{G1}}} 99012334871
# HELP DCGM_FI_DEV_PCIE_REPLAY_COUNTER Total number of PCIe retries.
# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter
DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{G0}}} 0
DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{G1}}} 0
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{G0}}} 87
DCGM_FI_DEV_GPU_UTIL{{{G1}}} 99
# HELP DCGM_FI_DEV_MEM_COPY_UTIL Memory utilization (in %).
# TYPE DCGM_FI_DEV_MEM_COPY_UTIL gauge
DCGM_FI_DEV_MEM_COPY_UTIL{{{G0}}} 41
DCGM_FI_DEV_MEM_COPY_UTIL{{{G1}}} 63
# HELP DCGM_FI_DEV_CLOCKS_EVENT_REASONS Current clock event reasons (bitmask).
# TYPE DCGM_FI_DEV_CLOCKS_EVENT_REASONS gauge
DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{G0}}} 0
DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{G1}}} 100
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{{{G0},err_code="0",err_msg="No Error"}} 0
DCGM_FI_DEV_XID_ERRORS{{{G1},err_code="79",err_msg="GPU has fallen off the bus"}} 79
# HELP DCGM_FI_DEV_POWER_VIOLATION Throttling duration due to power constraints (in ns).
# TYPE DCGM_FI_DEV_POWER_VIOLATION counter
DCGM_FI_DEV_POWER_VIOLATION{{{G0}}} 1250000000
DCGM_FI_DEV_POWER_VIOLATION{{{G1}}} 9223372036854775794
# HELP DCGM_FI_DEV_THERMAL_VIOLATION Throttling duration due to thermal constraints (in ns).
# TYPE DCGM_FI_DEV_THERMAL_VIOLATION counter
DCGM_FI_DEV_THERMAL_VIOLATION{{{G0}}} 0
DCGM_FI_DEV_THERMAL_VIOLATION{{{G1}}} 48210000000
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{{{G0}}} 7554
DCGM_FI_DEV_FB_FREE{{{G1}}} 81004
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{{G0}}} 73450
DCGM_FI_DEV_FB_USED{{{G1}}} 0
# HELP DCGM_FI_DEV_FB_RESERVED Framebuffer memory reserved (in MiB).
# TYPE DCGM_FI_DEV_FB_RESERVED gauge
DCGM_FI_DEV_FB_RESERVED{{{G0}}} 555
DCGM_FI_DEV_FB_RESERVED{{{G1}}} 555
# HELP DCGM_FI_DEV_ECC_DBE_VOL_TOTAL Total number of double-bit volatile ECC errors.
# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{G0}}} 0
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{G1}}} 2
# HELP DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL Total number of NVLink bandwidth counters for all lanes
# TYPE DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL counter
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{{G0}}} 0
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{{G1}}} 0
# HELP DCGM_FI_DEV_VGPU_LICENSE_STATUS vGPU License status
# TYPE DCGM_FI_DEV_VGPU_LICENSE_STATUS gauge
DCGM_FI_DEV_VGPU_LICENSE_STATUS{{{G0}}} 0
DCGM_FI_DEV_VGPU_LICENSE_STATUS{{{G1}}} 0
# HELP DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS Number of remapped rows for uncorrectable errors
# TYPE DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS counter
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{G0}}} 0
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{G1}}} 3
# HELP DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS Number of remapped rows for correctable errors
# TYPE DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS counter
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{{{G0}}} 0
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{{{G1}}} 1
# HELP DCGM_FI_DEV_ROW_REMAP_FAILURE Whether remapping of rows has failed
# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge
DCGM_FI_DEV_ROW_REMAP_FAILURE{{{G0}}} 0
DCGM_FI_DEV_ROW_REMAP_FAILURE{{{G1}}} 1
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{G0}}} 0.853211
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{G1}}} 0.990012
"""


def _minimal(gpu: str = G0, *extra: str) -> str:
    """Just the memory rows one GPU needs, plus `extra` sample lines."""
    return (
        "\n".join([f"DCGM_FI_DEV_FB_USED{{{gpu}}} 100", f"DCGM_FI_DEV_FB_FREE{{{gpu}}} 900", *extra]) + "\n"
    )


# -- the mapping ---------------------------------------------------------------------------


def test_it_reads_every_gpu_with_its_identity_labels():
    reading = reading_from_dcgm(EXPORTER_TEXT)
    assert [(g.index, g.uuid, g.pci_bus_id, g.name) for g in reading.gpus] == [
        (0, UUID0, "00000000:18:00.0", "NVIDIA H100 80GB HBM3"),
        (1, UUID1, "00000000:2A:00.0", "NVIDIA H100 80GB HBM3"),
    ]
    assert (reading.driver_version, reading.cuda_version, reading.hostname) == (
        "570.133.20",
        "",
        "gpu-node-07",
    )


def test_the_cuda_version_is_read_where_the_counters_csv_makes_it_a_label():
    labels = f'{G0},DCGM_FI_CUDA_DRIVER_VERSION="12080"'
    assert reading_from_dcgm(_minimal(labels)).cuda_version == "12.8"


def test_memory_counts_the_driver_s_reserved_memory_as_used_as_nvml_does():
    first, second = reading_from_dcgm(EXPORTER_TEXT).gpus
    assert (first.memory_total_mib, first.memory_used_mib, first.memory_free_mib) == (81559, 74005, 7554)
    assert (second.memory_total_mib, second.memory_used_mib) == (81559, 555)


def test_without_fb_reserved_total_is_used_plus_free_and_fb_total_wins_where_exported():
    assert reading_from_dcgm(_minimal()).gpus[0].memory_total_mib == 1000
    text = _minimal(G0, f"DCGM_FI_DEV_FB_TOTAL{{{G0}}} 1200")
    assert (
        reading_from_dcgm(text).gpus[0].memory_total_mib,
        reading_from_dcgm(text).gpus[0].memory_used_mib,
    ) == (
        1200,
        300,
    )


def test_utilisation_temperature_power_and_clocks_map_to_their_fields():
    gpu = reading_from_dcgm(EXPORTER_TEXT).gpus[0]
    assert (gpu.sm_utilization_pct, gpu.memory_utilization_pct, gpu.temperature_c) == (87, 41, 61)
    assert (gpu.power_draw_w, gpu.power_limit_w) == (512.318, 700.0)
    assert (gpu.sm_clock_mhz, gpu.max_sm_clock_mhz) == (1980, 1980)


def test_the_power_limit_falls_back_to_the_management_limit_and_absent_fields_read_zero():
    gpu = reading_from_dcgm(_minimal(G0, f"DCGM_FI_DEV_POWER_MGMT_LIMIT{{{G0}}} 650.000000")).gpus[0]
    assert (gpu.power_limit_w, gpu.max_sm_clock_mhz, gpu.temperature_c, gpu.throttle_reasons) == (
        650.0,
        0,
        0,
        (),
    )


def test_the_clock_event_bitmask_reads_as_nvml_s_reason_names():
    assert reading_from_dcgm(EXPORTER_TEXT).gpus[1].throttle_reasons == (
        "sw_power_cap",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
    )
    old_name = _minimal(G0, f"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{G0}}} 2056")  # 0x808
    assert reading_from_dcgm(old_name).gpus[0].throttle_reasons == ("hw_slowdown", "unknown_0x800")


def test_the_last_xid_keeps_the_exporter_s_message():
    first, second = reading_from_dcgm(EXPORTER_TEXT).gpus
    assert (first.xid_errors, first.xid_messages) == ((), ())
    assert (second.xid_errors, second.xid_messages) == ((79,), ("GPU has fallen off the bus",))


def test_an_xid_without_err_msg_from_an_older_exporter_has_no_message():
    gpu = reading_from_dcgm(_minimal(G0, f"DCGM_FI_DEV_XID_ERRORS{{{G0}}} 48")).gpus[0]
    assert (gpu.xid_errors, gpu.xid_messages) == ((48,), ())


def test_the_xid_count_of_the_exporter_s_window_names_every_xid_and_overrides_the_last_one():
    window = 'window_size_in_ms="300000"'
    text = _minimal(
        G0,
        f'DCGM_FI_DEV_XID_ERRORS{{{G0},err_code="13",err_msg="Graphics Engine Exception"}} 13',
        f'DCGM_EXP_XID_ERRORS_COUNT{{{G0},{window},xid="31"}} 2',
        f'DCGM_EXP_XID_ERRORS_COUNT{{{G0},{window},xid="13"}} 1',
    )
    gpu = reading_from_dcgm(text).gpus[0]
    assert (gpu.xid_errors, gpu.xid_messages) == ((13, 31), ("Graphics Engine Exception", ""))
    quiet = _minimal(
        G0, f"DCGM_FI_DEV_XID_ERRORS{{{G0}}} 13", f"DCGM_EXP_XID_ERRORS_COUNT{{{G0},{window}}} 0"
    )
    assert reading_from_dcgm(quiet).gpus[0].xid_errors == ()


def test_ecc_remapped_rows_and_violation_counters_are_kept():
    first, second = reading_from_dcgm(EXPORTER_TEXT).gpus
    assert (second.ecc_uncorrected_volatile, second.remapped_rows_uncorrectable) == (2, 3)
    assert (second.remapped_rows_correctable, second.row_remap_failure, second.row_remap_pending) == (
        1,
        True,
        False,
    )
    assert (first.power_violation_ns, first.thermal_violation_ns) == (1_250_000_000, 0)
    assert second.thermal_violation_ns == 48_210_000_000


def test_a_value_dcgm_marks_blank_counts_as_not_exported():
    assert reading_from_dcgm(EXPORTER_TEXT).gpus[1].power_violation_ns is None
    blank_double = _minimal(G0, f"DCGM_FI_DEV_POWER_USAGE{{{G0}}} 140737488355330.000000")
    assert reading_from_dcgm(blank_double).gpus[0].power_draw_w == 0


def test_dcgm_4_field_names_old_namespace_and_lowercase_hostname_are_understood():
    ids = 'gpu="3",uuid="GPU-x",pci_bus_id="00000000:9A:00.0",device="nvidia3",modelName="H200",hostname="n1"'
    text = _minimal(
        ids,
        f"DCGM_FI_DEV_GPU_TEMP_CELSIUS{{{ids}}} 55",
        f"DCGM_FI_DEV_ROW_REMAP_PENDING{{{ids}}} 1",
        f"DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL{{{ids}}} 1",
    )
    reading = reading_from_dcgm(text)
    gpu = reading.gpus[0]
    assert (gpu.index, gpu.uuid, gpu.temperature_c, gpu.row_remap_pending) == (3, "GPU-x", 55, True)
    assert (reading.hostname, gpu.remapped_rows_uncorrectable) == ("n1", 1)


def test_pod_copies_of_a_row_give_way_to_the_gpu_s_own_row():
    pod = 'pod="vllm-0",namespace="llm",container="vllm"'
    text = _minimal(
        G0,
        f"DCGM_FI_DEV_GPU_UTIL{{{G0},{pod}}} 12",
        f"DCGM_FI_DEV_GPU_UTIL{{{G0}}} 90",
        f"DCGM_FI_DEV_GPU_TEMP{{{G0},{pod}}} 70",
        f'DCGM_FI_DEV_GPU_TEMP{{{G0},pod="b",namespace="llm",container="x"}} 70',
    )
    gpu = reading_from_dcgm(text).gpus[0]
    assert (gpu.sm_utilization_pct, gpu.temperature_c) == (90, 70)


def test_mig_instances_stand_for_their_gpu_with_memory_summed():
    one, two = (f'{G0},GPU_I_PROFILE="3g.40gb",GPU_I_ID="{i}"' for i in (1, 2))
    rows = [
        *(f"DCGM_FI_DEV_FB_USED{{{m}}} {used}" for m, used in ((one, 100), (two, 300))),
        *(f"DCGM_FI_DEV_FB_FREE{{{m}}} 20000" for m in (one, two)),
        f"DCGM_FI_DEV_GPU_TEMP{{{one}}} 50",
        f"DCGM_FI_DEV_GPU_TEMP{{{G0}}} 52",  # the GPU's own row beats its instances'
    ]
    gpu = reading_from_dcgm("\n".join(rows) + "\n").gpus[0]
    assert (gpu.memory_total_mib, gpu.memory_used_mib, gpu.temperature_c) == (40400, 400, 52)


# -- findings ------------------------------------------------------------------------------


class _TextBackend:
    def __init__(self, text: str) -> None:
        self.text = text

    def read(self):
        return reading_from_dcgm(self.text)


def test_a_failed_row_remap_is_a_degraded_finding_naming_the_gpu_and_its_rows():
    found = gpu_findings(read_gpus(backend=_TextBackend(EXPORTER_TEXT)), None, Thresholds())
    remap = next(f for f in found if f.code == "gpu.row_remap")
    assert (remap.severity, remap.category) == ("degraded", Category.ECC)
    assert str(remap.evidence) == (
        "GPU 1: row remapping failed (3 rows remapped for uncorrectable errors, 1 for correctable ones): "
        "its memory cannot be repaired any more; drain it and have it serviced"
    )


def test_a_pending_row_remap_is_degraded_and_says_a_reset_applies_it():
    text = _minimal(G0, f"DCGM_FI_DEV_ROW_REMAP_PENDING{{{G0}}} 1")
    (remap,) = [f for f in gpu_findings(read_gpus(backend=_TextBackend(text)), None, Thresholds())]
    assert (remap.code, remap.severity) == ("gpu.row_remap", "degraded")
    assert "drain the GPU and reset it to apply it" in str(remap.evidence)


def test_an_xid_our_table_lacks_is_named_by_the_exporter_s_message():
    text = _minimal(
        G0, f'DCGM_FI_DEV_XID_ERRORS{{{G0},err_code="154",err_msg="GPU Recovery Action Changed"}} 154'
    )
    (xid,) = gpu_findings(read_gpus(backend=_TextBackend(text)), None, Thresholds())
    assert str(xid.evidence) == "GPU 0: XID 154 (GPU Recovery Action Changed)"


# -- bad text ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<html><body>502 Bad Gateway</body></html>\n", "not Prometheus text"),
        ("", "holds no GPU metrics"),
        (
            "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 12\n",
            "no GPU",
        ),
        ('DCGM_FI_DEV_GPU_TEMP{gpu="GPU-0"} 50\n', 'DCGM_FI_DEV_GPU_TEMP has gpu="GPU-0", not a GPU index'),
        ('DCGM_FI_DEV_GPU_TEMP{gpu="-1"} 50\n', "not a GPU index"),
        (_minimal(G0) + _minimal(G0), "DCGM_FI_DEV_FB_USED appears twice for GPU 0"),
        (
            _minimal(G0) + _minimal(_ids(0, UUID1, "00000000:2A:00.0")),
            f"GPU 0 appears twice, as {UUID0} and {UUID1}",
        ),
        (
            _minimal(G0) + _minimal(_ids(1, UUID0, "00000000:2A:00.0")),
            f"{UUID0} appears as GPU 0 and as GPU 1",
        ),
        (f"DCGM_FI_DEV_GPU_TEMP{{{G0}}} 50\n", "GPU 0: the exporter does not export DCGM_FI_DEV_FB_FREE"),
        ('DCGM_FI_DEV_GPU_TEMP{gpu="0"} 50\nDCGM_FI_DEV_FB_USED{gpu="0" 1\n', "not Prometheus text"),
    ],
    ids=[
        "html",
        "empty",
        "no-gpu",
        "gpu-not-a-number",
        "gpu-negative",
        "same-metric-twice",
        "one-index-two-uuids",
        "one-uuid-two-indices",
        "no-memory",
        "truncated-labels",
    ],
)
def test_bad_text_is_a_clear_nvml_error(text, message):
    with pytest.raises(NvmlError, match=message):
        reading_from_dcgm(text)


def test_text_cut_off_anywhere_reads_or_is_an_nvml_error():
    read = 0
    for end in range(0, len(EXPORTER_TEXT), 97):
        with contextlib.suppress(NvmlError):  # anything else fails the test
            read += len(reading_from_dcgm(EXPORTER_TEXT[:end]).gpus) > 0
    assert read > 0  # once both memory rows are in, a cut-off text still reads


def test_a_50_mib_text_is_refused_before_parsing():
    with pytest.raises(NvmlError, match=f"over the {MAX_BYTES} limit"):
        reading_from_dcgm(_minimal() * (50 * 1024 * 1024 // len(_minimal())))


# -- the backend over HTTP ------------------------------------------------------------------


def _exporter(body: bytes | str, status: int = 200):
    async def handler(request, writer):
        await respond(writer, status, body, content_type="text/plain; version=0.0.4; charset=utf-8")

    return app({"GET /metrics": handler})


def _read(url: str, timeout: float = 1.0):
    return asyncio.to_thread(DcgmExporterBackend(f"{url}/metrics", timeout=timeout).read)


@pytest.mark.anyio
async def test_the_backend_reads_a_real_exporter_endpoint():
    async with serve(_exporter(EXPORTER_TEXT)) as url:
        reading = await _read(url)
    assert reading == reading_from_dcgm(EXPORTER_TEXT)


def test_the_registry_builds_the_dcgm_backend_from_a_url():
    backend = nvml_backend_for("dcgm", url="http://gpu-node-07:9400/metrics", timeout=2.0)
    assert isinstance(backend, DcgmExporterBackend)
    assert (backend.url, backend.timeout) == ("http://gpu-node-07:9400/metrics", 2.0)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("handler", "message"),
    [
        (hang, "did not answer within 1 s"),
        (trickle, "did not finish within 1 s"),
        (not_http, "could not be read"),
        (_exporter("# just a comment\n"), "holds no GPU metrics"),
        (_exporter(b"\xff\xfe\x00garbage"), "not UTF-8"),
        (_exporter("oops", status=500), "answered HTTP 500"),
        (huge(MAX_BYTES + 65536 * 4, declared=True), f"declares {MAX_BYTES + 65536 * 4} bytes"),
        (huge(MAX_BYTES + 65536 * 4, declared=False), f"sent more than {MAX_BYTES} bytes"),
    ],
    ids=["hang", "trickle", "not-http", "not-dcgm", "not-utf8", "http-500", "huge-declared", "huge-chunked"],
)
async def test_every_failure_of_the_exporter_is_an_nvml_error_naming_its_url(handler, message):
    async with serve(handler) as url:
        with pytest.raises(NvmlError, match=message) as raised:
            await _read(url)
    assert f"dcgm-exporter {url}/metrics" in str(raised.value)


def test_an_exporter_nobody_listens_for_is_an_nvml_error():
    url = closed_port_url()
    with pytest.raises(NvmlError, match=f"dcgm-exporter {url}/metrics could not be read"):
        DcgmExporterBackend(f"{url}/metrics", timeout=1.0).read()
