"""The GPU catalogue shared by the inventory and the sizing calculator.

memory_mib is the total that NVML (nvidia-smi's memory.total) reports for the board,
which is what vLLM multiplies by gpu_memory_utilization; it is a little below the
marketing figure (an "80 GB" H100 reports 81559 MiB). Bandwidths are the vendor's
peak figures in GB/s. Where NVML's figure was not found in a posted nvidia-smi output,
memory_mib is derived from a sibling board with the same memory (same chip and capacity)
and docs/gpu-catalogue.md says so; that file lists the source of every figure.

An AMD MI250X/MI250 is two dies (GCDs) that ROCm shows as two GPUs of 64 GB each, so its
entry is one GCD: memory and bandwidth per GCD, as vLLM sees it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

_SIZE_IN_NAME = re.compile(r"\d\s*GB\b")


class FormFactor(StrEnum):
    SXM = "sxm"
    PCIE = "pcie"
    OAM = "oam"
    SOC = "soc"  # the GPU is part of a system-on-chip (GB10, Jetson): no card, no socket


@dataclass(frozen=True, kw_only=True)
class GpuModel:
    key: str
    name: str
    vendor: str
    memory_gb: int
    memory_mib: int
    bandwidth_gbps: int
    form_factors: tuple[FormFactor, ...]
    interconnect: str
    interconnect_gbps: int
    fp8: bool

    @property
    def label(self) -> str:
        return self.name if _SIZE_IN_NAME.search(self.name) else f"{self.name} ({self.memory_gb} GB)"


FORM_FACTOR_CHOICES = [
    (FormFactor.SXM.value, "SXM"),
    (FormFactor.PCIE.value, "PCIe"),
    (FormFactor.OAM.value, "OAM"),
    (FormFactor.SOC.value, "SoC"),
]

_SXM = (FormFactor.SXM,)
_PCIE = (FormFactor.PCIE,)
_SXM_PCIE = (FormFactor.SXM, FormFactor.PCIE)
_OAM = (FormFactor.OAM,)
_SOC = (FormFactor.SOC,)

# Three lines a card (what it is; its memory; how it links), laid out by hand: the formatter
# would spread each card over twelve lines.
# fmt: off
CATALOGUE: dict[str, GpuModel] = {
    gpu.key: gpu
    for gpu in (
        GpuModel(key="a100-40gb", name="NVIDIA A100 40GB", vendor="nvidia",
                 memory_gb=40, memory_mib=40960, bandwidth_gbps=1555, form_factors=_SXM_PCIE,
                 interconnect="NVLink 3", interconnect_gbps=600, fp8=False),
        GpuModel(key="a100-80gb", name="NVIDIA A100 80GB", vendor="nvidia",
                 memory_gb=80, memory_mib=81920, bandwidth_gbps=2039, form_factors=_SXM_PCIE,
                 interconnect="NVLink 3", interconnect_gbps=600, fp8=False),
        GpuModel(key="h100-80gb", name="NVIDIA H100 80GB", vendor="nvidia",
                 memory_gb=80, memory_mib=81559, bandwidth_gbps=3350, form_factors=_SXM_PCIE,
                 interconnect="NVLink 4", interconnect_gbps=900, fp8=True),
        GpuModel(key="h100-nvl", name="NVIDIA H100 NVL", vendor="nvidia",
                 memory_gb=94, memory_mib=95830, bandwidth_gbps=3900, form_factors=_PCIE,
                 interconnect="NVLink bridge", interconnect_gbps=600, fp8=True),
        GpuModel(key="h200-141gb", name="NVIDIA H200", vendor="nvidia",
                 memory_gb=141, memory_mib=143771, bandwidth_gbps=4800, form_factors=_SXM,
                 interconnect="NVLink 4", interconnect_gbps=900, fp8=True),
        GpuModel(key="b200-180gb", name="NVIDIA B200", vendor="nvidia",
                 memory_gb=180, memory_mib=183359, bandwidth_gbps=8000, form_factors=_SXM,
                 interconnect="NVLink 5", interconnect_gbps=1800, fp8=True),
        GpuModel(key="h200-nvl", name="NVIDIA H200 NVL", vendor="nvidia",
                 memory_gb=141, memory_mib=143771, bandwidth_gbps=4800, form_factors=_PCIE,
                 interconnect="NVLink bridge", interconnect_gbps=900, fp8=True),
        GpuModel(key="h800", name="NVIDIA H800", vendor="nvidia",
                 memory_gb=80, memory_mib=81559, bandwidth_gbps=3350, form_factors=_SXM_PCIE,
                 interconnect="NVLink 4", interconnect_gbps=400, fp8=True),
        GpuModel(key="h20", name="NVIDIA H20", vendor="nvidia",
                 memory_gb=96, memory_mib=97871, bandwidth_gbps=4000, form_factors=_SXM,
                 interconnect="NVLink 4", interconnect_gbps=900, fp8=True),
        GpuModel(key="a800-80gb", name="NVIDIA A800 80GB", vendor="nvidia",
                 memory_gb=80, memory_mib=81920, bandwidth_gbps=2039, form_factors=_SXM_PCIE,
                 interconnect="NVLink 3", interconnect_gbps=400, fp8=False),
        GpuModel(key="gb10", name="NVIDIA GB10", vendor="nvidia",
                 memory_gb=128, memory_mib=122547, bandwidth_gbps=273, form_factors=_SOC,
                 interconnect="ConnectX-7 200 Gb/s", interconnect_gbps=25, fp8=True),
        GpuModel(key="l40s", name="NVIDIA L40S", vendor="nvidia",
                 memory_gb=48, memory_mib=46068, bandwidth_gbps=864, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=True),
        GpuModel(key="l40", name="NVIDIA L40", vendor="nvidia",
                 memory_gb=48, memory_mib=46068, bandwidth_gbps=864, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=True),
        GpuModel(key="l4", name="NVIDIA L4", vendor="nvidia",
                 memory_gb=24, memory_mib=23034, bandwidth_gbps=300, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=True),
        GpuModel(key="a10", name="NVIDIA A10", vendor="nvidia",
                 memory_gb=24, memory_mib=23028, bandwidth_gbps=600, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=False),
        GpuModel(key="a10g", name="NVIDIA A10G", vendor="nvidia",
                 memory_gb=24, memory_mib=23028, bandwidth_gbps=600, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=False),
        GpuModel(key="l20", name="NVIDIA L20", vendor="nvidia",
                 memory_gb=48, memory_mib=46068, bandwidth_gbps=864, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=True),
        GpuModel(key="a40", name="NVIDIA A40", vendor="nvidia",
                 memory_gb=48, memory_mib=46068, bandwidth_gbps=696, form_factors=_PCIE,
                 interconnect="NVLink bridge", interconnect_gbps=112, fp8=False),
        GpuModel(key="rtx-a6000", name="NVIDIA RTX A6000", vendor="nvidia",
                 memory_gb=48, memory_mib=49140, bandwidth_gbps=768, form_factors=_PCIE,
                 interconnect="NVLink bridge", interconnect_gbps=112, fp8=False),
        GpuModel(key="rtx-3090", name="NVIDIA GeForce RTX 3090", vendor="nvidia",
                 memory_gb=24, memory_mib=24576, bandwidth_gbps=936, form_factors=_PCIE,
                 interconnect="NVLink bridge", interconnect_gbps=112, fp8=False),
        GpuModel(key="rtx-4080", name="NVIDIA GeForce RTX 4080", vendor="nvidia",
                 memory_gb=16, memory_mib=16376, bandwidth_gbps=717, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=True),
        GpuModel(key="rtx-4090", name="NVIDIA GeForce RTX 4090", vendor="nvidia",
                 memory_gb=24, memory_mib=24564, bandwidth_gbps=1008, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=True),
        GpuModel(key="rtx-4090d", name="NVIDIA GeForce RTX 4090 D", vendor="nvidia",
                 memory_gb=24, memory_mib=24564, bandwidth_gbps=1008, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=True),
        GpuModel(key="rtx-5090", name="NVIDIA GeForce RTX 5090", vendor="nvidia",
                 memory_gb=32, memory_mib=32607, bandwidth_gbps=1792, form_factors=_PCIE,
                 interconnect="PCIe 5.0 x16", interconnect_gbps=128, fp8=True),
        GpuModel(key="rtx-6000-ada", name="NVIDIA RTX 6000 Ada", vendor="nvidia",
                 memory_gb=48, memory_mib=49140, bandwidth_gbps=960, form_factors=_PCIE,
                 interconnect="PCIe 4.0 x16", interconnect_gbps=64, fp8=True),
        GpuModel(key="t4", name="NVIDIA T4", vendor="nvidia",
                 memory_gb=16, memory_mib=15360, bandwidth_gbps=320, form_factors=_PCIE,
                 interconnect="PCIe 3.0 x16", interconnect_gbps=32, fp8=False),
        GpuModel(key="v100-32gb", name="NVIDIA V100 32GB", vendor="nvidia",
                 memory_gb=32, memory_mib=32768, bandwidth_gbps=900, form_factors=_SXM_PCIE,
                 interconnect="NVLink 2", interconnect_gbps=300, fp8=False),
        GpuModel(key="mi250", name="AMD Instinct MI250X/MI250 GCD", vendor="amd",
                 memory_gb=64, memory_mib=65536, bandwidth_gbps=1638, form_factors=_OAM,
                 interconnect="Infinity Fabric", interconnect_gbps=400, fp8=False),
        GpuModel(key="mi300x", name="AMD Instinct MI300X", vendor="amd",
                 memory_gb=192, memory_mib=196592, bandwidth_gbps=5300, form_factors=_OAM,
                 interconnect="Infinity Fabric", interconnect_gbps=896, fp8=True),
        GpuModel(key="mi325x", name="AMD Instinct MI325X", vendor="amd",
                 memory_gb=256, memory_mib=262128, bandwidth_gbps=6000, form_factors=_OAM,
                 interconnect="Infinity Fabric", interconnect_gbps=896, fp8=True),
    )
}
# fmt: on


def get(key: str) -> GpuModel:
    try:
        return CATALOGUE[key]
    except KeyError:
        known = ", ".join(sorted(CATALOGUE))
        raise KeyError(f"unknown GPU model {key!r}; known models: {known}") from None


CUSTOM_KEY = "custom"
MIN_CUSTOM_MIB = 1024
MAX_CUSTOM_MIB = 4 * 1024 * 1024  # 4 TiB: far above any one accelerator today


def custom(*, memory_mib: int) -> GpuModel:
    """A GPU outside the catalogue, known only by its total memory as NVML reports it;
    its other figures are unknown (0 / empty), which the calculator does not use."""
    if not MIN_CUSTOM_MIB <= memory_mib <= MAX_CUSTOM_MIB:
        raise ValueError(f"GPU memory {memory_mib} MiB is outside {MIN_CUSTOM_MIB}..{MAX_CUSTOM_MIB} MiB")
    return GpuModel(
        key=CUSTOM_KEY,
        name=f"GPU with {memory_mib:,} MiB",
        vendor="",
        memory_gb=round(memory_mib * 2**20 / 1e9),
        memory_mib=memory_mib,
        bandwidth_gbps=0,
        form_factors=(),
        interconnect="",
        interconnect_gbps=0,
        fp8=False,
    )


def choices() -> list[tuple[str, str]]:
    return [(gpu.key, gpu.label) for gpu in CATALOGUE.values()]
