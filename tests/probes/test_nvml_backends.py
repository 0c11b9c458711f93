import asyncio
import json

import pytest

from fleet.nvml.base import NvmlError, NvmlReading, ThrottleReason
from fleet.nvml.dcgm import DcgmExporterBackend
from fleet.nvml.device_check import reading_problems
from fleet.nvml.pynvml_backend import (
    PynvmlBackend,
    cuda_version_text,
    load_pynvml,
    throttle_reasons_from_mask,
)
from fleet.nvml.simulated_backend import SimulatedNvmlBackend, nvml_backend_for
from tests.probes.gpus import gpu
from tests.probes.servers import app, closed_port_url, respond, serve


def _driver_present() -> bool:
    nvml = load_pynvml()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return False
    nvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_driver_present(), reason="an NVIDIA driver is present here; device_check covers it")
def test_without_a_driver_the_real_backend_raises_a_clear_nvml_error():
    with pytest.raises(NvmlError, match="NVML could not start .*NVIDIA driver"):
        PynvmlBackend().read()


def test_the_throttle_bitmask_maps_to_reason_names():
    assert throttle_reasons_from_mask(0) == ()
    assert throttle_reasons_from_mask(0x1) == ("gpu_idle",)
    assert throttle_reasons_from_mask(0x4 | 0x40) == ("sw_power_cap", "hw_thermal_slowdown")
    assert throttle_reasons_from_mask(0x800 | 0x8) == ("hw_slowdown", "unknown_0x800")


def test_the_bit_values_agree_with_pynvml_s_constants():
    nvml = load_pynvml()
    names = {
        "GpuIdle": ThrottleReason.GPU_IDLE,
        "ApplicationsClocksSetting": ThrottleReason.APPLICATIONS_CLOCKS,
        "SwPowerCap": ThrottleReason.SW_POWER_CAP,
        "HwSlowdown": ThrottleReason.HW_SLOWDOWN,
        "SyncBoost": ThrottleReason.SYNC_BOOST,
        "SwThermalSlowdown": ThrottleReason.SW_THERMAL,
        "HwThermalSlowdown": ThrottleReason.HW_THERMAL,
        "HwPowerBrakeSlowdown": ThrottleReason.HW_POWER_BRAKE,
        "DisplayClockSetting": ThrottleReason.DISPLAY_CLOCKS,
    }
    for suffix, reason in names.items():
        assert throttle_reasons_from_mask(getattr(nvml, f"nvmlClocksThrottleReason{suffix}")) == (reason,)


def test_the_cuda_driver_version_integer_reads_as_major_minor():
    assert cuda_version_text(12040) == "12.4"
    assert cuda_version_text(13000) == "13.0"


READING = NvmlReading(driver_version="570.124.06", cuda_version="12.8", gpus=(gpu(0), gpu(1)))


def _nvml_server(body, status=200):
    async def handler(request, writer):
        await respond(writer, status, body, content_type="application/json")

    return app({"GET /_sim/nvml": handler})


@pytest.mark.anyio
async def test_the_simulated_backend_reads_the_simulator_s_json():
    async with serve(_nvml_server(READING.to_dict())) as url:
        backend = nvml_backend_for("simulated", url=f"{url}/_sim/nvml", timeout=2.0)
        assert await asyncio.to_thread(backend.read) == READING


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("not json", 200, "sent a bad reading"),
        (
            json.dumps({"driver_version": "1", "cuda_version": "2", "gpus": [{"index": 0, "colour": "red"}]}),
            200,
            "unknown GPU state fields: colour",
        ),
        ("{}", 500, "answered HTTP 500"),
    ],
    ids=["garbage", "unknown-field", "status"],
)
async def test_the_simulated_backend_turns_every_failure_into_an_nvml_error(body, status, message):
    async with serve(_nvml_server(body, status)) as url:
        with pytest.raises(NvmlError, match=message):
            await asyncio.to_thread(SimulatedNvmlBackend(f"{url}/_sim/nvml", 2.0).read)


def test_an_unreachable_simulator_is_an_nvml_error():
    with pytest.raises(NvmlError, match="did not answer"):
        SimulatedNvmlBackend(closed_port_url() + "/_sim/nvml", 1.0).read()


def test_the_registry_knows_its_kinds():
    assert isinstance(nvml_backend_for("pynvml"), PynvmlBackend)
    assert isinstance(nvml_backend_for("dcgm", url="http://10.0.0.5:9400/metrics"), DcgmExporterBackend)
    with pytest.raises(ValueError, match="unknown NVML backend 'rocm'"):
        nvml_backend_for("rocm")


def test_device_check_accepts_a_sane_reading_and_names_impossible_values():
    assert reading_problems(READING) == []
    broken = NvmlReading(
        driver_version="570",
        cuda_version="12.8",
        gpus=(gpu(0, memory_used_mib=200000, sm_clock_mhz=2500, throttle_reasons=("unknown_0x800",)),),
    )
    assert reading_problems(broken) == [
        "GPU 0: memory used 200000 MiB is outside 0..143771",
        "GPU 0: SM clock 2500 MHz is outside 0..1980",
        "GPU 0: unknown throttle reasons ['unknown_0x800']",
    ]
