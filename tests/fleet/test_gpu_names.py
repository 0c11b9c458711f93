"""GPU names as nvidia-smi, NVML, DCGM, rocm-smi, amd-smi, PyTorch and vLLM print them, read
as catalogue cards; a name that is no catalogue card, or that could be more than one, is
None, never a wrong card. Every name below was copied from the output posted at its URL."""

import pytest

from fleet import gpu_catalog
from fleet.gpu_names import MAX_NAME_CHARS, close_matches, compact, find_gpu, unknown_gpu

REAL_NAMES = [
    # nvidia-smi's table (the Name column)
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),  # https://github.com/RLinf/RLinf/issues/255
    ("NVIDIA GeForce RTX 5090", "rtx-5090"),  # https://github.com/noonghunna/club-3090/issues/1261
    ("NVIDIA GeForce RTX 3090", "rtx-3090"),  # https://github.com/noonghunna/club-3090/issues/1128
    ("NVIDIA A800-SXM4-80GB", "a800-80gb"),  # https://github.com/dexmal/dexbotic/issues/41
    # https://github.com/bottlerocket-os/bottlerocket-core-kit/pull/834
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA H100 80GB HBM3", "h100-80gb"),  # https://github.com/wilicc/gpu-burn/issues/114
    ("NVIDIA A800 80GB PCIe", "a800-80gb"),  # https://github.com/vllm-project/vllm/issues/41519
    ("NVIDIA GB10", "gb10"),  # https://github.com/NVIDIA/k8s-device-plugin/issues/1482
    ("NVIDIA B200", "b200-180gb"),  # https://github.com/NVIDIA/TensorRT-LLM/issues/10278
    ("NVIDIA RTX 6000D", None),  # https://github.com/aikitoria/open-gpu-kernel-modules/issues/20
    ("Quadro RTX 4000", None),  # https://github.com/akash-network/provider-configs/pull/12
    # an old nvidia-smi cuts long names: "A100-SXM..." is the 40 GB or the 80 GB card
    ("NVIDIA A100-SXM...", None),  # https://github.com/nanopool/phoenix-miner/issues/17
    # nvidia-smi -q "Product Name" lines, label and all
    # https://github.com/NVIDIA/mig-parted/issues/120
    ("    Product Name                          : NVIDIA H200", "h200-141gb"),
    # https://github.com/milvus-io/milvus/issues/7493
    ("    Product Name                          : NVIDIA GeForce RTX 3090", "rtx-3090"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),  # https://github.com/NVIDIA/CUDALibrarySamples/issues/104
    ("NVIDIA RTX A6000", "rtx-a6000"),  # https://github.com/mrirecon/bart/issues/323
    ("NVIDIA L40S", "l40s"),  # https://github.com/isaac-sim/IsaacSim/issues/228
    ("NVIDIA H800", "h800"),  # https://github.com/NVIDIA/DCGM/issues/120
    ("Tesla V100-SXM2-32GB", "v100-32gb"),  # https://github.com/NVIDIA/nvidia-docker/issues/1076
    ("Tesla V100-SXM2-16GB", None),  # https://github.com/NVIDIA/nvidia-docker/issues/914
    ("Tesla T4", "t4"),  # https://github.com/NVIDIA/nvidia-docker/issues/1628
    ("Tesla K80", None),  # https://github.com/NVIDIA/nvidia-docker/issues/809
    ("NVIDIA GeForce RTX 2070", None),  # https://github.com/NVIDIA/nvidia-docker/issues/1643
    ("NVIDIA GeForce RTX 2060", None),  # https://github.com/NVIDIA/nvidia-docker/issues/1724
    ("NVIDIA GeForce RTX 2080 Ti", None),  # https://github.com/NVIDIA/nvidia-docker/issues/1760
    ("GeForce GTX 780", None),  # https://github.com/MatthiasSchinzel/sysmon/issues/12
    ("GeForce GTX 1650", None),  # https://github.com/NVIDIA/nvidia-docker/issues/1330
    # nvidia-smi --query-gpu=name --format=csv
    ("NVIDIA RTX A4000", None),  # https://github.com/RainbowMiner/RainbowMiner/issues/1796
    # fastfetch (NVML's name) and gpud (NVML's product name, dashed)
    ("NVIDIA H100 NVL", "h100-nvl"),  # https://github.com/fastfetch-cli/fastfetch/issues/1658
    ("NVIDIA-GB10", "gb10"),  # https://github.com/leptonai/gpud/pull/1170
    # torch.cuda.get_device_name(), as posted with benchmark results
    ("NVIDIA H20", "h20"),  # https://github.com/zzc0721/torch-performance-test-data/issues/77
    # https://github.com/zzc0721/torch-performance-test-data/issues/20
    ("NVIDIA GeForce RTX 4090 D", "rtx-4090d"),
    # https://github.com/zzc0721/torch-performance-test-data/issues/20 (a 48 GB modded board)
    ("NVIDIA GeForce RTX 4090 48G DDR5", None),
    # https://github.com/zzc0721/torch-performance-test-data/issues/20
    ("NVIDIA GeForce RTX 4090 D 48G DDR5", None),
    ("NVIDIA GeForce RTX 5090 D", None),  # https://github.com/zzc0721/torch-performance-test-data/issues/167
    ("NVIDIA L20", "l20"),  # https://github.com/zzc0721/torch-performance-test-data/issues/107
    ("NVIDIA L4", "l4"),  # https://github.com/zzc0721/torch-performance-test-data/issues/120
    ("NVIDIA A40", "a40"),  # https://github.com/zzc0721/torch-performance-test-data/issues/185
    ("NVIDIA RTX A2000 12GB", None),  # https://github.com/zzc0721/torch-performance-test-data/issues/72
    # https://github.com/zzc0721/torch-performance-test-data/issues/108
    ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
    ("NVIDIA A10G", "a10g"),  # https://github.com/zzc0721/torch-performance-test-data/issues/126
    ("NVIDIA GeForce RTX 3080 20g", None),  # https://github.com/zzc0721/torch-performance-test-data/issues/80
    ("NVIDIA H800 PCIe", "h800"),  # https://github.com/zzc0721/torch-performance-test-data/issues/112
    ("NVIDIA H100 PCIe", "h100-80gb"),  # https://github.com/zzc0721/torch-performance-test-data/issues/95
    # vLLM's collect_env.py and rocminfo / amd-smi on AMD
    # https://github.com/vllm-project/vllm/issues/14062
    ("AMD Instinct MI300X (gfx942:sramecc+:xnack-)", "mi300x"),
    # https://github.com/vllm-project/vllm/issues/16386
    ("AMD Instinct MI210 (gfx90a:sramecc+:xnack-)", None),
    ("AMD Instinct MI250X/MI250", "mi250"),  # https://github.com/ROCm/rocm_smi_lib/issues/160
    ("AMD Instinct MI350X", None),  # https://github.com/ROCm/rocm-systems/pull/2987
    ("AMD Instinct MI350 OAM", None),  # https://github.com/ROCm/rocm-systems/pull/2987
    ("AMD Instinct MI308X OAM", None),  # https://github.com/vllm-project/vllm/pull/27623
    ("AMD Radeon Graphics", None),  # https://github.com/vllm-project/vllm/pull/27623
    # vLLM's tuned-kernel file names: the device name with "_" for " "
    # https://github.com/vllm-project/vllm/tree/main/vllm/model_executor/layers/fused_moe/configs
    ("NVIDIA_H100_80GB_HBM3", "h100-80gb"),
    ("NVIDIA_A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA_A100_80GB_PCIe", "a100-80gb"),
    ("NVIDIA_H100_NVL", "h100-nvl"),
    ("NVIDIA_H100_PCIe", "h100-80gb"),
    ("NVIDIA_H200", "h200-141gb"),
    ("NVIDIA_H800", "h800"),
    ("NVIDIA_H20", "h20"),
    ("NVIDIA_H20-3e", None),  # "-3e" is the 141 GB HBM3e H20, not the 96 GB one
    ("NVIDIA_B200", "b200-180gb"),
    ("NVIDIA_B100", None),
    ("NVIDIA_GB200", None),
    ("NVIDIA_L40S", "l40s"),
    ("NVIDIA_L20", "l20"),
    ("NVIDIA_A10", "a10"),
    ("NVIDIA_GeForce_RTX_4090", "rtx-4090"),
    ("NVIDIA_GeForce_RTX_5090", "rtx-5090"),
    ("NVIDIA_GeForce_RTX_2080_Ti", None),
    ("NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition", None),
    ("NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition", None),
    ("AMD_Instinct_MI300X", "mi300x"),
    ("AMD_Instinct_MI325X", "mi325x"),
    ("AMD_Instinct_MI308X", None),
    ("AMD_Radeon_R9700", None),
    ("Intel(R)_Arc(TM)_Pro_B60_Graphics", None),
]


def _key(gpu):
    return gpu.key if gpu else None


def test_the_table_holds_at_least_sixty_real_names():
    assert len({name for name, _ in REAL_NAMES}) >= 60


@pytest.mark.parametrize("name, key", REAL_NAMES)
def test_it_reads_a_name_as_the_tools_print_it(name, key):
    assert _key(find_gpu(name)) == key


@pytest.mark.parametrize("key", list(gpu_catalog.CATALOGUE))
def test_every_catalogue_key_and_name_finds_its_own_card(key):
    gpu = gpu_catalog.CATALOGUE[key]
    assert find_gpu(key) is gpu
    assert find_gpu(gpu.name) is gpu
    assert find_gpu(gpu.name.upper()) is gpu


@pytest.mark.parametrize(
    "typed, key",
    [
        ("h100", "h100-80gb"),
        ("H100 80GB", "h100-80gb"),
        ("h100 80 gb", "h100-80gb"),
        ("  nvidia   a100   80gb  ", "a100-80gb"),
        ("A100 40G", "a100-40gb"),
        ("l40s", "l40s"),
        ("4090", "rtx-4090"),
        ("RTX 4090D", "rtx-4090d"),
        ("rtx4090 d", "rtx-4090d"),
        ("RTX 6000 Ada", "rtx-6000-ada"),
        ("A6000", "rtx-a6000"),
        ("mi250x", "mi250"),
        ("MI250", "mi250"),
        ("Card series: AMD Instinct MI300X OAM", "mi300x"),
        ("NVIDIA H100 80G...", "h100-80gb"),  # cut, yet only one card fits
    ],
)
def test_it_reads_names_as_people_type_them(typed, key):
    assert _key(find_gpu(typed)) == key


@pytest.mark.parametrize(
    "ambiguous",
    ["A100", "NVIDIA A100", "A800", "V100", "NVIDIA GeForce ...", "RTX", "NVIDIA", ""],
)
def test_a_name_that_could_be_more_than_one_card_is_none(ambiguous):
    assert find_gpu(ambiguous) is None


@pytest.mark.parametrize(
    "garbage",
    [None, 42, b"NVIDIA H100", "x" * (MAX_NAME_CHARS + 1), "\x00\xff", "💥", "NVIDIA H100 " * 50],
)
def test_garbage_and_huge_input_is_none_not_a_crash(garbage):
    assert find_gpu(garbage) is None


def test_compact_keeps_what_tells_cards_apart():
    assert compact("NVIDIA A100-SXM4-80GB") == compact("NVIDIA A100 80GB PCIe") == "a10080gb"
    assert compact("NVIDIA H100 NVL") != compact("NVIDIA H100 PCIe")


def test_close_matches_suggest_catalogue_keys():
    assert "h100-80gb" in close_matches("H1000")
    assert close_matches("") == []


@pytest.mark.django_db
def test_the_unknown_gpu_error_names_close_matches_or_the_catalogue():
    assert "close matches: " in str(unknown_gpu("NVIDIA H10"))
    message = str(unknown_gpu("tpu-v5"))
    assert "unknown GPU 'tpu-v5'" in message
    assert "h100-80gb" in message


# Where the console takes a GPU's name: the inventory API and import, and the NVML check.


@pytest.mark.django_db
def test_the_inventory_api_stores_a_gpu_named_as_nvidia_smi_prints_it(cast):
    from rest_framework.test import APIClient

    from tests.factories import make_host

    make_host(name="node-a")
    client = APIClient()
    client.force_login(cast.for_role("sre"))
    payload = {"host": "node-a", "index": 0, "model": "NVIDIA H100 80GB HBM3", "form_factor": "sxm"}
    created = client.post("/api/gpus/", payload, format="json")
    assert created.status_code == 201, created.json()
    assert (created.json()["model"], created.json()["memory_mib"]) == ("h100-80gb", 81559)
    refused = client.post("/api/gpus/", {**payload, "index": 1, "model": "NVIDIA A100"}, format="json")
    assert refused.status_code == 400
    assert "close matches: a100-40gb, a100-80gb" in refused.json()["model"][0]


@pytest.mark.django_db
def test_an_inventory_import_reads_gpu_models_as_nvidia_smi_prints_them():
    from fleet.inventory_io import apply_import, plan_import
    from fleet.models import Gpu

    text = (
        "hosts:\n  - {name: node-b, address: 10.0.0.9, numa_nodes: 1}\n"
        "gpus:\n"
        "  - {host: node-b, index: 0, model: 'NVIDIA A100-SXM4-40GB', form_factor: sxm, numa_node: 0}\n"
        "  - {host: node-b, index: 1, model: 'Tesla V100-SXM2-32GB', form_factor: sxm, numa_node: 0}\n"
    )
    plan = plan_import(text=text, fmt="yaml")
    assert plan.ok, [str(e) for e in plan.errors]
    apply_import(plan=plan, actor=None, source="import")
    assert list(Gpu.objects.order_by("index").values_list("model", flat=True)) == ["a100-40gb", "v100-32gb"]
    bad = plan_import(text=text.replace("Tesla V100-SXM2-32GB", "Tesla V100-SXM2-16GB"), fmt="yaml")
    (error,) = [str(e) for e in bad.errors]
    assert error.startswith(
        "line 5: gpu node-b/gpu1: model: unknown GPU 'Tesla V100-SXM2-16GB'; close matches: v100-32gb, "
    )


def test_the_nvml_check_says_which_card_each_gpu_is_and_how_its_memory_compares():
    from fleet.nvml.base import GpuState, NvmlReading
    from fleet.nvml.device_check import catalogue_notes

    def state(index, name, total):
        return GpuState(
            index=index, uuid=f"GPU-{index}", name=name, pci_bus_id=f"00000000:0{index}:00.0",
            memory_total_mib=total, memory_used_mib=0, sm_utilization_pct=0, memory_utilization_pct=0,
            temperature_c=40, power_draw_w=80, power_limit_w=700, sm_clock_mhz=300, max_sm_clock_mhz=1980,
        )  # fmt: skip

    reading = NvmlReading(
        driver_version="580.159.04",
        cuda_version="13.0",
        gpus=(
            state(0, "NVIDIA H200", 143771),  # as the H200 of the project's device check reported
            state(1, "NVIDIA H100 80GB HBM3", 95830),
            state(2, "NVIDIA RTX 6000D", 85651),
        ),
    )
    assert catalogue_notes(reading) == [
        "GPU 0: 'NVIDIA H200' is h200-141gb (143771 MiB)",
        "GPU 1: 'NVIDIA H100 80GB HBM3' is h100-80gb, but NVML reports 95830 MiB and the catalogue 81559 MiB",
        "GPU 2: 'NVIDIA RTX 6000D' is not in the GPU catalogue; size it as a custom GPU of 85651 MiB",
    ]


def test_the_nvml_check_and_the_name_reader_run_where_django_is_not_installed():
    import subprocess
    import sys

    # device_check runs on a bare GPU machine with only pynvml; Django must stay optional.
    code = (
        "import sys; sys.modules['django'] = None\n"
        "from fleet.nvml.device_check import catalogue_notes\n"
        "from fleet.gpu_names import find_gpu\n"
        "assert find_gpu('NVIDIA H200').key == 'h200-141gb'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
