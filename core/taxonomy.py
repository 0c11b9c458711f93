"""The guide's taxonomy of LLM-serving failures (2.1), with the console's own additions for
what the probes and logs tell apart. Trees, triage rules and incidents name categories by
these keys."""

from __future__ import annotations

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

CATEGORIES: dict[str, str | Promise] = {
    "timeout.ttft": _("Timeout: time to first token"),
    "timeout.tps": _("Timeout: generation speed (tokens/s) dropped"),
    "timeout.connect": _("Timeout: connection (TCP/HTTP) fails"),
    "timeout.network": _("Timeout: lost in the network"),
    "rate_limit.http_429": _("Rate limiting: HTTP 429 from a gateway"),
    "rate_limit.queue": _("Rate limiting: the engine's queue is full"),
    "rate_limit.token_quota": _("Rate limiting: token quota spent"),
    "rate_limit.lora_slots": _("Rate limiting: LoRA adapters wait for a free slot (--max-loras)"),
    "oom.gpu": _("OOM: GPU memory"),
    "oom.kv_pressure": _("KV cache full (waiting and preemption, not an OOM)"),
    "oom.cpu": _("OOM: host memory"),
    "oom.container": _("OOM: container memory limit (OOMKilled)"),
    "cuda.oom": _("CUDA error: out of memory (allocation in the CUDA runtime)"),
    "cuda.nccl": _("CUDA: NCCL communication error"),
    "cuda.device_assert": _("CUDA: device-side assert"),
    "cuda.version": _("CUDA: version or driver mismatch"),
    "cuda.xid": _("GPU hardware fault (XID, ECC)"),
    "model_loading.corrupt_weights": _("Model loading: corrupt or incomplete weights"),
    "model_loading.not_enough_memory": _("Model loading: not enough memory to load"),
    "model_loading.safetensors": _("Model loading: safetensors format error"),
    "model_loading.disk_full": _("Model loading: disk full"),
    "model_loading.config": _("Model loading: bad configuration or flags"),
    "process.crash": _("Process: crashed (SIGSEGV, SIGABRT)"),
    "process.killed": _("Process: killed (SIGKILL, exit 137)"),
    "process.not_started": _("Process: not started or not listening"),
    "process.unresponsive": _("Process: accepts connections but does not answer"),
    "process.hung": _("Engine hung: health answers, but no token is generated"),
    "process.engine_dead": _("Process: the engine core died (health fails, requests 500)"),
    "process.asleep": _("Process: the engine is asleep (sleep mode), generation paused"),
    "server.5xx": _("Server errors (500/502/503/504)"),
    "gpu.thermal": _("GPU: thermal or power throttling"),
    "gpu.saturated": _("GPU: compute saturated"),
    "gpu.numa": _("GPU: CPU/NUMA placement"),
    "network.tls": _("Network: TLS/certificate"),
    "client.error": _("Client-side error"),
    "config.model_name": _("Configuration: the served model name is not what the server lists"),
    "config.version": _("Configuration: the engine version differs from the inventory"),
    "config.spec_decode": _("Configuration: speculative decoding costs more than it saves"),
    "routing.prefix_cache": _("Routing: requests no longer reach the replica holding their prefix"),
    "probe.metrics": _("Monitoring: the engine's metrics cannot be read"),
    "probe.error": _("Probe: the request failed in an unexpected way"),
    "probe.garbage": _("Probe: the server answered something that is not its API"),
}


def label(category: str) -> str:
    """The category's name in the active language (the key itself if unknown)."""
    return str(CATEGORIES.get(category, category))


def family(category: str) -> str:
    """The top of the taxonomy: timeout, rate_limit, oom, cuda, model_loading, ..."""
    return category.split(".", 1)[0]
