"""'Fill from' an inventory instance, a gateway or a sizing result: the generator values they
imply. Values still go through the generator's checks; a name that cannot be used is left
to its default with a note."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from diagnostics.configgen.vllm_flags import SUPPORTED_VERSIONS
from diagnostics.sizing.versions import nearest_choice
from fleet.models import Gateway, Instance

# What from_instance can fill: a generator with none of these has no instance picker.
INSTANCE_FIELDS = frozenset(
    {
        "model",
        "name",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "gpu_memory_utilization",
        "enable_prefix_caching",
        "kv_cache_dtype",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
        "dtype",
        "quantization",
        "port",
        "vllm_version",
        "gpu_devices",
        "api_key_env",
        "base_url",
    }
)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63] or "vllm"


def from_instance(instance: Instance) -> dict[str, str]:
    """Launch values (vllm, docker, k8s, systemd) from how an instance is launched."""
    values = {
        "model": instance.served_model_name,
        "name": _slug(instance.name),
        "tensor_parallel_size": str(instance.tensor_parallel_size),
        "pipeline_parallel_size": str(instance.pipeline_parallel_size),
        "gpu_memory_utilization": f"{instance.gpu_memory_utilization:g}",
        "enable_prefix_caching": "on" if instance.enable_prefix_caching else "off",
        "kv_cache_dtype": "fp8" if instance.kv_cache_dtype.startswith("fp8") else "auto",
    }
    for flag in ("max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        value = getattr(instance, flag)
        values[flag] = str(value) if value else ""
    if instance.dtype in ("bfloat16", "float16"):
        values["dtype"] = instance.dtype
    if instance.quantization in ("fp8", "awq", "gptq", "bitsandbytes"):
        values["quantization"] = instance.quantization
    port = urlsplit(instance.base_url).port
    if port:
        values["port"] = str(port)
    version = nearest_choice(instance.engine_version or "", SUPPORTED_VERSIONS)
    if version:
        values["vllm_version"] = version
    indexes = sorted(instance.gpus.values_list("index", flat=True))
    if indexes:
        values["gpu_devices"] = ",".join(str(i) for i in indexes)
    if instance.api_key_env:
        values["api_key_env"] = instance.api_key_env
    values["base_url"] = instance.base_url.rstrip("/") + "/v1"  # for the client generator
    return values


def from_gateway(gateway: Gateway) -> dict[str, str]:
    """nginx values: the gateway's name and port, upstream servers from its instances."""
    parts = urlsplit(gateway.url)
    servers = []
    for instance in gateway.instances.order_by("name"):
        target = urlsplit(instance.base_url)
        if target.hostname:
            servers.append(f"{target.hostname}:{target.port or 80}")
    values = {"upstream_servers": "\n".join(servers)} if servers else {}
    if parts.hostname:
        values["server_name"] = parts.hostname
    if parts.scheme == "https":
        values["tls"] = "on"
    elif parts.port:
        values["listen_port"] = str(parts.port)
    return values


def from_sizing(result: dict[str, Any]) -> dict[str, str]:
    """Launch values from a sizing result (its JSON): the flags it sized and the host memory
    it recommends."""
    flags = result["flags"]
    host = result["recommendations"]["host"]
    values = {
        "tensor_parallel_size": str(flags["tensor_parallel_size"]),
        "pipeline_parallel_size": str(flags["pipeline_parallel_size"]),
        "gpu_memory_utilization": f"{flags['gpu_memory_utilization']:g}",
        "max_model_len": str(flags["max_model_len"]),
        "max_num_seqs": str(flags["max_num_seqs"]),
        "max_num_batched_tokens": str(flags["max_num_batched_tokens"]),
        "kv_cache_dtype": "fp8" if flags["kv_cache_dtype"].startswith("fp8") else "auto",
        "memory_limit_gib": str(max(int(round(host["container_limit_gib"])), 1)),
        "memory_request_gib": str(max(int(round(host["container_request_gib"])), 1)),
        "shm_size_gib": str(host["shm_gib"]),
        "gpu_devices": ",".join(
            str(i) for i in range(flags["tensor_parallel_size"] * flags["pipeline_parallel_size"])
        ),
    }
    return values
