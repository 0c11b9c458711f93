"""The soak's fleet: N simulated instances on loopback, in the inventory import format.

Hosts of eight GPUs each, one instance a GPU, every host's telemetry read from the
simulator (so GPU probes and XID faults have something to read). The engine mix follows
the simulator's synthetic fleet: 8 in 10 vLLM across its metric generations, 1 TGI, 1
Ollama. The text is JSON, which the YAML importer reads.
"""

from __future__ import annotations

import json
import random
import socket

GPUS_PER_HOST = 8
_VLLM = (
    ("0.11.2", "meta-llama/Llama-3.1-8B-Instruct", "h100-80gb"),
    ("0.10.1", "Qwen/Qwen2.5-7B-Instruct", "l40s"),
    ("0.8.5", "mistralai/Mistral-7B-Instruct-v0.3", "a100-80gb"),
    ("0.12.0", "meta-llama/Llama-3.1-8B-Instruct", "h100-80gb"),
    ("0.7.3", "Qwen/Qwen2.5-7B-Instruct", "a100-80gb"),
    ("0.11.0", "mistralai/Mistral-7B-Instruct-v0.3", "h100-80gb"),
    ("0.9.2", "meta-llama/Llama-3.1-8B-Instruct", "l40s"),
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_port_block(count: int, *, low: int = 10000, high: int = 30000, tries: int = 50) -> int:
    """The first port of `count` consecutive loopback ports that are free now, below Linux's
    ephemeral range (32768 up), where outgoing connections could take one before the
    simulator listens on it."""
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(low, high - count)
        if all(_is_free(port) for port in range(base, base + count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports between {low} and {high}")


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def instance_names(count: int) -> list[str]:
    return [_engine_and_name(i)[1] for i in range(count)]


def inventory_text(*, count: int, base_port: int) -> str:
    """The import file of `count` instances listening on base_port, base_port + 1, ..."""
    hosts = (count + GPUS_PER_HOST - 1) // GPUS_PER_HOST
    data = {
        "hosts": [_host(h) for h in range(hosts)],
        "gpus": [_gpu(i) for i in range(count)],
        "instances": [_instance(i, base_port + i) for i in range(count)],
    }
    return json.dumps(data, indent=1)


def _host_name(h: int) -> str:
    return f"soak-host-{h:03d}"


def _host(h: int) -> dict:
    return {
        "name": _host_name(h),
        "address": f"10.99.{h // 250}.{h % 250 + 1}",
        "tags": ["soak"],
        "gpu_telemetry": "simulated",
        "driver_version": "570.133.20",
        "cuda_version": "12.8",
    }


def _gpu_model(i: int) -> str:
    engine, _ = _engine_and_name(i)
    if engine == "vllm":
        return _VLLM[i % len(_VLLM)][2]
    return "a100-80gb" if engine == "tgi" else "l40s"


def _gpu(i: int) -> dict:
    # A host's GPUs share one model: the host of instance i takes the model of its first instance.
    model = _gpu_model(i - i % GPUS_PER_HOST)
    return {
        "host": _host_name(i // GPUS_PER_HOST),
        "index": i % GPUS_PER_HOST,
        "model": model,
        "form_factor": "pcie" if model == "l40s" else "sxm",
    }


def _engine_and_name(i: int) -> tuple[str, str]:
    engine = {8: "tgi", 9: "ollama"}.get(i % 10, "vllm")
    return engine, f"soak-{engine}-{i:04d}"


def _instance(i: int, port: int) -> dict:
    engine, name = _engine_and_name(i)
    row = {
        "name": name,
        "host": _host_name(i // GPUS_PER_HOST),
        "gpus": [i % GPUS_PER_HOST],
        "engine": engine,
        "base_url": f"http://127.0.0.1:{port}",
        "max_model_len": 8192,
    }
    if engine == "vllm":
        version, model, _ = _VLLM[i % len(_VLLM)]
        return row | {"engine_version": version, "served_model_name": model, "max_num_seqs": 128}
    if engine == "tgi":
        return row | {"engine_version": "3.3.4", "served_model_name": "mistralai/Mistral-7B-Instruct-v0.3"}
    return row | {"engine_version": "0.12.3", "served_model_name": "llama3.1:8b", "quantization": "gguf"}
