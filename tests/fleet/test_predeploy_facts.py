"""The facts a host agent sends for the pre-deploy checklist: a JSON round trip, and garbage
from a remote agent refused with every problem named."""

import dataclasses
import json

import pytest

from fleet.hostchecks.predeploy_facts import FactsError, GpuFact, ModelFiles, PredeployFacts

GIB = 1 << 30


def h100(index, **changes):
    gpu = GpuFact(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        memory_total_mib=81559,
        memory_used_mib=2,
        process_count=0,
        numa_node=0,
    )
    return dataclasses.replace(gpu, **changes)


def ready_host(**changes):
    """Two idle H100s on one NUMA node, a 570 driver, a complete model on disk."""
    facts = PredeployFacts(
        driver_version="570.133.20",
        cuda_driver_version="12.8",
        gpus=(h100(0), h100(1)),
        mem_total_bytes=512 * GIB,
        mem_available_bytes=480 * GIB,
        swap_total_bytes=8 * GIB,
        model_dir="/models/Qwen3-32B",
        model_dir_exists=True,
        model_dir_free_bytes=500 * GIB,
        model_files=ModelFiles(
            config_json=True,
            tokenizer=True,
            safetensors_count=17,
            safetensors_bytes=65 * GIB,
            index_json_missing_shards=(),
        ),
        shm_total_bytes=64 * GIB,
        port=8000,
        port_listener=None,
        docker_version="27.3.1",
        cpu_numa_nodes=2,
    )
    return dataclasses.replace(facts, **changes)


TWO_NODES = (h100(0), h100(1, numa_node=1), h100(2), h100(3, numa_node=1))


def test_facts_survive_the_trip_through_json():
    facts = ready_host(gpus=TWO_NODES)

    assert PredeployFacts.from_dict(json.loads(json.dumps(facts.to_dict()))) == facts


def test_from_dict_names_every_missing_unknown_and_wrong_typed_field():
    data = ready_host().to_dict()
    del data["port"]
    data["hostname"] = "gpu-07"
    data["model_dir_exists"] = "yes"
    data["gpus"][0]["memory_total_mib"] = "80GB"
    data["gpus"][1]["process_count"] = True

    with pytest.raises(FactsError) as refused:
        PredeployFacts.from_dict(data)

    assert isinstance(refused.value, ValueError)
    assert refused.value.problems == [
        "facts: missing field(s) port",
        "facts: unknown field(s) hostname",
        "facts.gpus[0].memory_total_mib: expected an integer, got str",
        "facts.gpus[1].process_count: expected an integer, got bool",
        "facts.model_dir_exists: expected a boolean, got str",
    ]


@pytest.mark.parametrize(
    "data, problem",
    [
        ([1, 2], "facts: expected an object, got list"),
        ({**ready_host().to_dict(), "port": 70000}, "facts.port: 70000 is outside 1..65535"),
        ({**ready_host().to_dict(), "gpus": [h100(0).__dict__] * 65}, "facts.gpus: more than 64 entries"),
        (
            {**ready_host().to_dict(), "model_dir": "/m" * 3000},
            "facts.model_dir: longer than 4096 characters",
        ),
        ({**ready_host().to_dict(), "swap_total_bytes": -1}, "facts.swap_total_bytes: -1 is outside"),
        (
            {**ready_host().to_dict(), "model_files": {"config_json": True}},
            "facts.model_files: missing field(s)",
        ),
    ],
)
def test_from_dict_refuses_garbage_from_a_remote_agent_with_a_clear_message(data, problem):
    with pytest.raises(FactsError, match="host facts refused") as refused:
        PredeployFacts.from_dict(data)

    assert any(p.startswith(problem) for p in refused.value.problems)
