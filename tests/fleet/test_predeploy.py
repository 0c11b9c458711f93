"""The pre-deploy checklist (guide 4.1.1, fixed): judging the facts a host agent gathered."""

import dataclasses
import json

import pytest

from fleet.hostchecks.engine_builds import Version, engine_build
from fleet.hostchecks.predeploy import (
    GIB,
    ChecklistItem,
    PredeployRequirements,
    checklist_summary,
    run_checklist,
)
from fleet.probes.evidence import joined
from tests.fleet.test_predeploy_facts import TWO_NODES, h100, ready_host

KEYS = [
    "driver", "cuda", "gpus", "gpus_idle", "gpu_memory_free", "ram", "swap", "disk", "model_files", "shm",
    "port", "docker", "numa",
]  # fmt: skip


def instance(**changes):
    requirements = PredeployRequirements(
        engine="vllm",
        engine_version="0.10.1",
        weights_bytes=70 * GIB,
        gpu_indexes=(0, 1),
        tensor_parallel_size=2,
        gpu_memory_utilization=0.9,
        port=8000,
    )
    return dataclasses.replace(requirements, **changes)


def judged(facts=None, requirements=None):
    return run_checklist(facts=facts or ready_host(), requirements=requirements or instance())


def by_key(items):
    return {item.key: item for item in items}


def not_passed(items):
    return {item.key: item.status for item in items if item.status != "pass"}


def test_a_ready_host_passes_every_item_in_the_guides_order():
    items = judged()

    assert [item.key for item in items] == KEYS
    assert not_passed(items) == {}
    assert all(isinstance(item, ChecklistItem) and str(item.evidence) for item in items)
    assert checklist_summary(items).overall == "ready"


def test_the_evidence_names_the_numbers_it_judged():
    items = by_key(judged())

    assert (
        str(items["driver"].evidence)
        == "driver 570.133.20 ≥ 570.26 (the driver of CUDA 12.8 GA) for vLLM 0.10.1"
    )
    assert str(items["ram"].evidence) == "RAM 512 GiB ≥ 1.5 × 70 GiB + 8 GiB = 113 GiB"
    assert "NVIDIA H100 80GB HBM3 (79.6 GiB)" in str(items["gpus"].evidence)


MODEL_MISSING = dict(model_dir_exists=False, model_dir_free_bytes=50 * GIB)

# (what changes on the host, what changes in the instance, the items that do not pass, evidence)
FAILING_FACTS = {
    "an old driver": (
        dict(driver_version="470.82.01"), {}, {"driver": "fail"},
        "driver 470.82.01 < 525.60.13 (the oldest driver of CUDA 12.x minor-version compatibility",
    ),
    "a 535 driver under a CUDA 12.8 build": (
        dict(driver_version="535.54.03"), {}, {"driver": "warn"},
        "driver 535.54.03 < 570.26 (the driver of CUDA 12.8 GA) for vLLM 0.10.1, but ≥ 525.60.13",
    ),
    "a CUDA 11 driver": (
        dict(cuda_driver_version="11.8"), {}, {"cuda": "fail"},
        "the driver supports CUDA 11.8 < 12.8, the CUDA vLLM 0.10.1 is built for: a CUDA 12 build",
    ),
    "an older CUDA 12 driver": (
        dict(cuda_driver_version="12.2"), {}, {"cuda": "warn"}, "minor-version compatibility only",
    ),
    "a GPU the host lacks": (
        {}, dict(gpu_indexes=(0, 5)), {"gpus": "fail"}, "GPU 5: not on this host, which has GPU 0, 1",
    ),
    "weights too large for the GPUs": (
        {}, dict(weights_bytes=200 * GIB), {"gpus": "fail"},
        "weights 200 GiB / TP 2 = 100 GiB per GPU > 0.9 × 79.6 GiB = 71.7 GiB (GPU 0)",
    ),
    "a process on a GPU": (
        dict(gpus=(h100(0, process_count=1, memory_used_mib=1024), h100(1))), {}, {"gpus_idle": "fail"},
        "GPU 0: 1 process(es), 1024 MiB used",
    ),
    "memory held by a process NVML cannot see": (
        dict(gpus=(h100(0), h100(1, memory_used_mib=2048))), {}, {"gpus_idle": "fail"},
        "GPU 1: 2048 MiB used by processes NVML does not list",
    ),
    "a utilization that leaves no room": (
        dict(gpus=(h100(0, memory_used_mib=100), h100(1))), dict(gpu_memory_utilization=0.999),
        {"gpu_memory_free": "fail"},
        "GPU 0: 81459 MiB free < 0.999 × 81559 MiB = 81477 MiB; vLLM refuses to start: Free memory on "
        "device (79.55/79.65 GiB) on startup is less than desired GPU memory utilization (0.999, 79.57 GiB)",
    ),
    "too little RAM": (
        dict(mem_total_bytes=64 * GIB, mem_available_bytes=60 * GIB), dict(weights_bytes=140 * GIB),
        {"ram": "fail"}, "RAM 64 GiB < 1.5 × 140 GiB + 8 GiB = 218 GiB",
    ),
    "RAM taken by other processes": (
        dict(mem_available_bytes=100 * GIB), {}, {"ram": "warn"},
        "RAM 512 GiB, but only 100 GiB available < 1.5 × 70 GiB + 8 GiB = 113 GiB",
    ),
    "no swap": (dict(swap_total_bytes=0), {}, {"swap": "warn"}, "no swap"),
    "no room to download the model": (
        MODEL_MISSING, {}, {"disk": "fail", "model_files": "warn"},
        "50 GiB free where /models/Qwen3-32B goes < 70 GiB of weights",
    ),
    "a shard missing": (
        dict(model_files=dataclasses.replace(
            ready_host().model_files, index_json_missing_shards=("model-00003-of-00017.safetensors",))),
        {}, {"model_files": "fail"},
        "shards named in model.safetensors.index.json are missing: model-00003-of-00017.safetensors",
    ),
    "no tokenizer": (
        dict(model_files=dataclasses.replace(ready_host().model_files, tokenizer=False)), {},
        {"model_files": "fail"}, "/models/Qwen3-32B is incomplete: no tokenizer",
    ),
    "Docker's default /dev/shm under tensor parallelism": (
        dict(shm_total_bytes=64 * 1024 * 1024), {}, {"shm": "fail"},
        "/dev/shm 64 MiB < 1 GiB with tensor_parallel_size 2: NCCL fails to start",
    ),
    "Docker's default /dev/shm on one GPU": (
        dict(shm_total_bytes=64 * 1024 * 1024), dict(gpu_indexes=(0,), tensor_parallel_size=1),
        {"shm": "warn"},
        "--ipc=host or --shm-size",
    ),
    "the port taken": (
        dict(port_listener="pid 2716 python3"), {}, {"port": "fail"}, "port 8000 is in use: pid 2716 python3",
    ),
    "a Docker without --gpus": (
        dict(docker_version="18.09.7"), {}, {"docker": "warn"},
        "Docker 18.09.7: docker run --gpus needs 19.03 or newer",
    ),
    "GPUs on two NUMA nodes where one would do": (
        dict(gpus=TWO_NODES), {}, {"numa": "warn"},
        "GPU 0, 1 span NUMA nodes 0, 1: traffic crosses the CPU interconnect (guide 2.2.3); "
        "node 0 alone has GPU 0, 2",
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    "host_changes, instance_changes, expected, evidence", FAILING_FACTS.values(), ids=FAILING_FACTS
)
def test_each_failing_fact_fails_exactly_its_item_with_the_numbers(
    host_changes, instance_changes, expected, evidence
):
    items = judged(ready_host(**host_changes), instance(**instance_changes))

    assert not_passed(items) == expected
    first = next(key for key in KEYS if key in expected)
    assert evidence in str(by_key(items)[first].evidence)


def test_driver_versions_compare_as_numbers_not_as_strings():
    assert "535.54.03" > "1000.1"  # the guide's script: text order
    assert Version.parse("535.54.03") < Version.parse("570.26") < Version.parse("1000.1")
    assert Version.parse("12.8") == Version.parse("12.8.0") and Version.parse("13") == Version.parse("13.0")

    assert by_key(judged(ready_host(driver_version="1000.1")))["driver"].status == "pass"
    assert by_key(judged(ready_host(driver_version="535.54.03")))["driver"].status == "warn"


@pytest.mark.parametrize("field, garbage", [("driver_version", "N/A"), ("cuda_driver_version", "12.x")])
def test_a_version_that_is_not_one_is_unknown_and_quotes_the_text(field, garbage):
    item = next(i for i in judged(ready_host(**{field: garbage})) if i.key == field.split("_")[0])

    assert item.status == "unknown"
    assert repr(garbage) in str(item.evidence)


@pytest.mark.parametrize(
    "engine, version, cuda",
    [
        ("vllm", "0.6.3", "12.1"),
        ("vllm", "0.8.5.post1", "12.4"),
        ("vllm", "0.10.1.1", "12.8"),
        ("vllm", "0.11.0", "12.8"),
        ("vllm", "0.11.1rc2", "12.9"),
        ("vllm", "v0.12.0", "12.9"),
        ("vllm", "0.20.0", "13.0"),
        ("sglang", "0.5.19", "12.9"),
        ("sglang", "0.5.20", "13.0"),
        ("tgi", "3.3.4", "12.2"),
    ],
)
def test_the_engine_release_decides_which_cuda_build_the_driver_must_carry(engine, version, cuda):
    build, understood = engine_build(engine=engine, version=version)

    assert understood and build.cuda == Version.parse(cuda)


def test_an_engine_version_it_cannot_read_is_judged_by_the_newest_line_and_says_so():
    item = by_key(judged(requirements=instance(engine_version="latest")))["driver"]

    assert item.status == "fail"  # 570 is below the CUDA 13 floor of 580
    assert "vLLM (version 'latest' not understood: judged as its newest line, 0.20 and later)" in str(
        item.evidence
    )


def test_ollama_is_judged_by_its_own_documented_driver_minimum():
    items = by_key(
        judged(ready_host(driver_version="545.29.06"), instance(engine="ollama", engine_version="0.12.3"))
    )

    assert items["driver"].status == "warn"
    assert "< 550 (Ollama's documented minimum)" in str(items["driver"].evidence)
    assert items["cuda"].status == "pass"


def test_missing_facts_are_unknown_and_never_crash():
    bare = ready_host(
        driver_version=None,
        cuda_driver_version=None,
        gpus=(),
        mem_total_bytes=None,
        mem_available_bytes=None,
        swap_total_bytes=None,
        model_dir_exists=None,
        model_dir_free_bytes=None,
        model_files=None,
        shm_total_bytes=None,
        docker_version=None,
        cpu_numa_nodes=None,
    )
    items = judged(bare, instance(weights_bytes=None, gpu_indexes=()))

    assert not_passed(items) == {key: "unknown" for key in KEYS if key != "port"}
    assert checklist_summary(items).overall == "incomplete"


def test_gpus_that_report_no_usage_leave_their_items_unknown():
    quiet = tuple(h100(i, memory_used_mib=None, process_count=None, numa_node=None) for i in (0, 1))

    assert not_passed(judged(ready_host(gpus=quiet))) == {
        "gpus_idle": "unknown",
        "gpu_memory_free": "unknown",
        "numa": "unknown",
    }


def test_an_agent_that_checked_another_port_cannot_clear_this_one():
    item = by_key(judged(requirements=instance(port=8001)))["port"]

    assert (item.status, str(item.evidence)) == (
        "unknown",
        "the agent checked port 8000; the instance wants 8001",
    )


def test_requirements_refuse_an_engine_the_checklist_does_not_know():
    with pytest.raises(ValueError, match="engine 'llama.cpp' is not one of vllm, tgi, ollama, sglang"):
        instance(engine="llama.cpp")


@pytest.mark.parametrize(
    "statuses, overall",
    [
        ({}, "ready"),
        ({"swap": "warn"}, "ready with warnings"),
        ({"docker": "unknown"}, "ready"),  # Docker is information only
        ({"ram": "unknown", "swap": "warn"}, "incomplete"),
        ({"ram": "unknown", "port": "fail"}, "not ready"),
    ],
)
def test_the_summary_counts_each_status_and_gives_one_verdict(statuses, overall):
    items = [dataclasses.replace(item, status=statuses.get(item.key, "pass")) for item in judged()]

    summary = checklist_summary(items)

    assert summary.overall == overall
    assert sum(summary.counts.values()) == len(KEYS)
    assert summary.counts["pass"] == len(KEYS) - len(statuses)
    assert str(summary.label) == overall


def test_items_are_stored_as_json_messages_that_read_back_the_same():
    items = judged(ready_host(driver_version="535.54.03", swap_total_bytes=0))
    stored = json.loads(json.dumps([item.to_dict() for item in items]))

    assert [entry["status"] for entry in stored] == [item.status for item in items]
    assert stored[0]["evidence"]["params"]["basis"]["msgid"] == "the driver of CUDA %(cuda)s GA"
    assert str(joined([items[0].evidence])) == str(items[0].evidence)
