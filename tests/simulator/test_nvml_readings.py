"""/_sim/nvml: the JSON fleet.nvml reads, tied to the engine's load."""

from __future__ import annotations

import httpx

from fleet.nvml.base import GpuState, ThrottleReason
from fleet.simulator.nvml_readings import GpuLoad, gpu_indices, nvml_reading
from fleet.simulator.spec import GpuSlot, InstanceSpec

IDLE = GpuLoad(
    holds_memory=True,
    busy_fraction=0.0,
    occupancy=0.0,
    memory_share=0.9,
    process_name="VLLM::EngineCore",
    pid=4242,
)


def test_the_endpoint_serves_one_gpu_state_per_gpu_that_fleet_nvml_can_read(simulate):
    sim = simulate(
        InstanceSpec(name="tp2", params_b=32, gpu_count=2, driver_version="570.1", cuda_version="12.8")
    )
    reading = httpx.get(sim.url("tp2") + "/_sim/nvml").json()
    assert (reading["driver_version"], reading["cuda_version"]) == ("570.1", "12.8")
    gpus = [GpuState.from_dict(g) for g in reading["gpus"]]
    assert [g.index for g in gpus] == [0, 1] and gpus[0].uuid != gpus[1].uuid
    assert gpus[0].name == "NVIDIA H100 80GB" and gpus[0].memory_total_mib == 81559


def test_the_engine_holds_its_memory_pool_whether_busy_or_idle():
    spec = InstanceSpec(name="a", gpu_memory_utilization=0.9)
    gpu = nvml_reading(spec=spec, load=IDLE)["gpus"][0]
    assert gpu["memory_used_mib"] == int(81559 * 0.9)
    assert gpu["processes"][0]["name"] == "VLLM::EngineCore" and gpu["processes"][0]["pid"] == 4242
    assert gpu["sm_utilization_pct"] == 0 and ThrottleReason.GPU_IDLE in gpu["throttle_reasons"]


def test_utilization_power_and_temperature_follow_the_batch():
    spec = InstanceSpec(name="a")
    light = GpuLoad(**{**IDLE.__dict__, "busy_fraction": 1.0, "occupancy": 0.1})
    full = GpuLoad(**{**IDLE.__dict__, "busy_fraction": 1.0, "occupancy": 1.0})
    low, high = (nvml_reading(spec=spec, load=load)["gpus"][0] for load in (light, full))
    assert 50 < low["sm_utilization_pct"] < 70 and high["sm_utilization_pct"] == 100
    assert high["power_draw_w"] > low["power_draw_w"] and high["temperature_c"] > low["temperature_c"]
    assert ThrottleReason.SW_POWER_CAP in high["throttle_reasons"]


def test_the_inventorys_gpu_identity_is_kept():
    slot = GpuSlot(index=3, uuid="GPU-6b0d549b-6f03-475a-9600-a35a099950d8", pci_bus_id="00000000:5D:00.0")
    spec = InstanceSpec(name="a", gpus=(slot,))
    gpu = nvml_reading(spec=spec, load=IDLE)["gpus"][0]
    assert (gpu["index"], gpu["uuid"], gpu["pci_bus_id"]) == (3, slot.uuid, slot.pci_bus_id)


def test_an_xid_79_is_reported_on_the_gpu_it_names():
    spec = InstanceSpec(name="a", gpu_count=2, params_b=32)
    gpus = nvml_reading(spec=spec, load=GpuLoad(**{**IDLE.__dict__, "xid": 79, "xid_gpu": 1}))["gpus"]
    assert gpus[0]["xid_errors"] == () and gpus[1]["xid_errors"] == (79,)


def test_an_xid_without_a_gpu_is_reported_on_every_gpu_of_the_instance():
    spec = InstanceSpec(name="a", gpu_count=2, params_b=32, gpus=(GpuSlot(index=2), GpuSlot(index=3)))
    gpus = nvml_reading(spec=spec, load=GpuLoad(**{**IDLE.__dict__, "xid": 48}))["gpus"]
    assert [(g["index"], g["xid_errors"], g["ecc_uncorrected_volatile"]) for g in gpus] == [
        (2, (48,), 1),
        (3, (48,), 1),
    ]


def test_gpus_the_inventory_does_not_list_take_the_next_free_indices():
    assert gpu_indices(InstanceSpec(name="a", gpu_count=2, params_b=32)) == [0, 1]
    on_two = InstanceSpec(name="b", gpu_count=2, params_b=32, gpus=(GpuSlot(index=2),))
    assert gpu_indices(on_two) == [2, 3]
    assert [g["index"] for g in nvml_reading(spec=on_two, load=IDLE)["gpus"]] == [2, 3]
