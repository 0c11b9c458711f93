"""The GPU catalogue shared by the inventory and the sizing calculator.

memory_mib is the total that NVML (nvidia-smi's memory.total) reports for the board,
which is what vLLM multiplies by gpu_memory_utilization; it is a little below the
marketing figure (an "80 GB" H100 reports 81559 MiB). Bandwidths are the vendor's
peak figures in GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FormFactor(StrEnum):
    SXM = "sxm"
    PCIE = "pcie"
    OAM = "oam"


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
        return self.name if "GB" in self.name else f"{self.name} ({self.memory_gb} GB)"


FORM_FACTOR_CHOICES = [
    (FormFactor.SXM.value, "SXM"),
    (FormFactor.PCIE.value, "PCIe"),
    (FormFactor.OAM.value, "OAM"),
]

_SXM = (FormFactor.SXM,)
_PCIE = (FormFactor.PCIE,)

CATALOGUE: dict[str, GpuModel] = {
    gpu.key: gpu
    for gpu in (
        GpuModel(
            key="a100-40gb",
            name="NVIDIA A100 40GB",
            vendor="nvidia",
            memory_gb=40,
            memory_mib=40960,
            bandwidth_gbps=1555,
            form_factors=(FormFactor.SXM, FormFactor.PCIE),
            interconnect="NVLink 3",
            interconnect_gbps=600,
            fp8=False,
        ),
        GpuModel(
            key="a100-80gb",
            name="NVIDIA A100 80GB",
            vendor="nvidia",
            memory_gb=80,
            memory_mib=81920,
            bandwidth_gbps=2039,
            form_factors=(FormFactor.SXM, FormFactor.PCIE),
            interconnect="NVLink 3",
            interconnect_gbps=600,
            fp8=False,
        ),
        GpuModel(
            key="h100-80gb",
            name="NVIDIA H100 80GB",
            vendor="nvidia",
            memory_gb=80,
            memory_mib=81559,
            bandwidth_gbps=3350,
            form_factors=(FormFactor.SXM, FormFactor.PCIE),
            interconnect="NVLink 4",
            interconnect_gbps=900,
            fp8=True,
        ),
        GpuModel(
            key="h100-nvl",
            name="NVIDIA H100 NVL",
            vendor="nvidia",
            memory_gb=94,
            memory_mib=95830,
            bandwidth_gbps=3900,
            form_factors=_PCIE,
            interconnect="NVLink bridge",
            interconnect_gbps=600,
            fp8=True,
        ),
        GpuModel(
            key="h200-141gb",
            name="NVIDIA H200",
            vendor="nvidia",
            memory_gb=141,
            memory_mib=143771,
            bandwidth_gbps=4800,
            form_factors=_SXM,
            interconnect="NVLink 4",
            interconnect_gbps=900,
            fp8=True,
        ),
        GpuModel(
            key="b200-180gb",
            name="NVIDIA B200",
            vendor="nvidia",
            memory_gb=180,
            memory_mib=183359,
            bandwidth_gbps=8000,
            form_factors=_SXM,
            interconnect="NVLink 5",
            interconnect_gbps=1800,
            fp8=True,
        ),
        GpuModel(
            key="l40s",
            name="NVIDIA L40S",
            vendor="nvidia",
            memory_gb=48,
            memory_mib=46068,
            bandwidth_gbps=864,
            form_factors=_PCIE,
            interconnect="PCIe 4.0 x16",
            interconnect_gbps=64,
            fp8=True,
        ),
        GpuModel(
            key="l40",
            name="NVIDIA L40",
            vendor="nvidia",
            memory_gb=48,
            memory_mib=46068,
            bandwidth_gbps=864,
            form_factors=_PCIE,
            interconnect="PCIe 4.0 x16",
            interconnect_gbps=64,
            fp8=True,
        ),
        GpuModel(
            key="l4",
            name="NVIDIA L4",
            vendor="nvidia",
            memory_gb=24,
            memory_mib=23034,
            bandwidth_gbps=300,
            form_factors=_PCIE,
            interconnect="PCIe 4.0 x16",
            interconnect_gbps=64,
            fp8=True,
        ),
        GpuModel(
            key="a10",
            name="NVIDIA A10",
            vendor="nvidia",
            memory_gb=24,
            memory_mib=23028,
            bandwidth_gbps=600,
            form_factors=_PCIE,
            interconnect="PCIe 4.0 x16",
            interconnect_gbps=64,
            fp8=False,
        ),
        GpuModel(
            key="a10g",
            name="NVIDIA A10G",
            vendor="nvidia",
            memory_gb=24,
            memory_mib=23028,
            bandwidth_gbps=600,
            form_factors=_PCIE,
            interconnect="PCIe 4.0 x16",
            interconnect_gbps=64,
            fp8=False,
        ),
        GpuModel(
            key="rtx-4090",
            name="NVIDIA GeForce RTX 4090",
            vendor="nvidia",
            memory_gb=24,
            memory_mib=24564,
            bandwidth_gbps=1008,
            form_factors=_PCIE,
            interconnect="PCIe 4.0 x16",
            interconnect_gbps=64,
            fp8=True,
        ),
        GpuModel(
            key="rtx-6000-ada",
            name="NVIDIA RTX 6000 Ada",
            vendor="nvidia",
            memory_gb=48,
            memory_mib=49140,
            bandwidth_gbps=960,
            form_factors=_PCIE,
            interconnect="PCIe 4.0 x16",
            interconnect_gbps=64,
            fp8=True,
        ),
        GpuModel(
            key="t4",
            name="NVIDIA T4",
            vendor="nvidia",
            memory_gb=16,
            memory_mib=15360,
            bandwidth_gbps=320,
            form_factors=_PCIE,
            interconnect="PCIe 3.0 x16",
            interconnect_gbps=32,
            fp8=False,
        ),
        GpuModel(
            key="v100-32gb",
            name="NVIDIA V100 32GB",
            vendor="nvidia",
            memory_gb=32,
            memory_mib=32768,
            bandwidth_gbps=900,
            form_factors=(FormFactor.SXM, FormFactor.PCIE),
            interconnect="NVLink 2",
            interconnect_gbps=300,
            fp8=False,
        ),
        GpuModel(
            key="mi300x",
            name="AMD Instinct MI300X",
            vendor="amd",
            memory_gb=192,
            memory_mib=196592,
            bandwidth_gbps=5300,
            form_factors=(FormFactor.OAM,),
            interconnect="Infinity Fabric",
            interconnect_gbps=896,
            fp8=True,
        ),
        GpuModel(
            key="mi325x",
            name="AMD Instinct MI325X",
            vendor="amd",
            memory_gb=256,
            memory_mib=262128,
            bandwidth_gbps=6000,
            form_factors=(FormFactor.OAM,),
            interconnect="Infinity Fabric",
            interconnect_gbps=896,
            fp8=True,
        ),
    )
}


def get(key: str) -> GpuModel:
    try:
        return CATALOGUE[key]
    except KeyError:
        known = ", ".join(sorted(CATALOGUE))
        raise KeyError(f"unknown GPU model {key!r}; known models: {known}") from None


def choices() -> list[tuple[str, str]]:
    return [(gpu.key, gpu.label) for gpu in CATALOGUE.values()]


def find(name: str) -> GpuModel | None:
    """A GPU model by key ("h100-80gb") or by name as people write it ("H100", "NVIDIA A100 80GB")."""
    wanted = _squash(name)
    if name in CATALOGUE:
        return CATALOGUE[name]
    exact = [g for g in CATALOGUE.values() if wanted in (_squash(g.key), _squash(g.name))]
    if exact:
        return exact[0]
    prefixed = [
        g
        for g in CATALOGUE.values()
        if _squash(g.key).startswith(wanted) or _squash(g.name).startswith(wanted)
    ]
    return prefixed[0] if len(prefixed) == 1 else None


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower().replace("nvidia", "") if ch.isalnum())
