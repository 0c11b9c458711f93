"""Small factories for inventory objects; each saves a valid object with sensible defaults."""

from __future__ import annotations

import itertools

from fleet.models import Gateway, Gpu, GpuHost, Instance

_seq = itertools.count(1)


def make_host(**fields) -> GpuHost:
    n = next(_seq)
    values = {
        "name": f"gpu-node-{n:02d}",
        "address": f"10.0.0.{n % 250 + 1}",
        "datacenter": "dc1",
        "rack": "r1",
        "numa_nodes": 2,
        "cpu_cores": 64,
        "ram_gb": 512,
    }
    values.update(fields)
    host = GpuHost(**values)
    host.full_clean()
    host.save()
    return host


def make_gpu(host: GpuHost, **fields) -> Gpu:
    values = {"index": host.gpus.count(), "model": "h100-80gb", "form_factor": "sxm", "numa_node": 0}
    values.update(fields)
    gpu = Gpu(host=host, **values)
    gpu.full_clean()
    gpu.save()
    return gpu


def make_instance(host: GpuHost, *, gpus: list[Gpu] | None = None, **fields) -> Instance:
    n = next(_seq)
    values = {
        "name": f"vllm-{n:02d}",
        "base_url": f"http://127.0.0.1:{8100 + n}",
        "served_model_name": "Qwen/Qwen3-8B",
        "engine_version": "0.11.2",
        "max_model_len": 32768,
        "max_num_seqs": 64,
    }
    values.update(fields)
    instance = Instance(host=host, **values)
    instance.full_clean()
    instance.save()
    if gpus:
        instance.clean_gpus(gpus)
        instance.gpus.set(gpus)
    return instance


def make_gateway(*, instances: list[Instance] | None = None, **fields) -> Gateway:
    n = next(_seq)
    values = {"name": f"gw-{n:02d}", "kind": "nginx", "url": f"https://llm-{n}.example.com"}
    values.update(fields)
    gateway = Gateway(**values)
    gateway.full_clean()
    gateway.save()
    if instances:
        gateway.instances.set(instances)
    return gateway


def instance_form_data(host, **overrides) -> dict:
    """What the instance form posts for a plain vLLM instance on `host`, with `overrides`."""
    data = {
        "name": "vllm-new",
        "host": host.pk,
        "engine": "vllm",
        "base_url": "http://10.0.0.5:8000",
        "served_model_name": "m",
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "gpu_memory_utilization": 0.9,
        "dtype": "auto",
        "kv_cache_dtype": "auto",
        "enabled": "on",
    }
    data.update(overrides)
    return data
