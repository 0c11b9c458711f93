"""The guide's taxonomy of LLM-serving failures (2.1), with the console's own additions for
what the probes and logs tell apart. Trees, triage rules and incidents name categories by
these keys."""

from __future__ import annotations

CATEGORIES: dict[str, str] = {
    "timeout.ttft": "Timeout: time to first token",
    "timeout.tps": "Timeout: generation speed (tokens/s) dropped",
    "timeout.connect": "Timeout: connection (TCP/HTTP) fails",
    "timeout.network": "Timeout: lost in the network",
    "rate_limit.http_429": "Rate limiting: HTTP 429 from a gateway",
    "rate_limit.queue": "Rate limiting: the engine's queue is full",
    "rate_limit.token_quota": "Rate limiting: token quota spent",
    "oom.gpu": "OOM: GPU memory",
    "oom.kv_pressure": "KV cache full (waiting and preemption, not an OOM)",
    "oom.cpu": "OOM: host memory",
    "oom.container": "OOM: container memory limit (OOMKilled)",
    "cuda.oom": "CUDA error: out of memory (allocation in the CUDA runtime)",
    "cuda.nccl": "CUDA: NCCL communication error",
    "cuda.device_assert": "CUDA: device-side assert",
    "cuda.version": "CUDA: version or driver mismatch",
    "cuda.xid": "GPU hardware fault (XID, ECC)",
    "model_loading.corrupt_weights": "Model loading: corrupt or incomplete weights",
    "model_loading.not_enough_memory": "Model loading: not enough memory to load",
    "model_loading.safetensors": "Model loading: safetensors format error",
    "model_loading.disk_full": "Model loading: disk full",
    "model_loading.config": "Model loading: bad configuration or flags",
    "process.crash": "Process: crashed (SIGSEGV, SIGABRT)",
    "process.killed": "Process: killed (SIGKILL, exit 137)",
    "process.not_started": "Process: not started or not listening",
    "process.unresponsive": "Process: accepts connections but does not answer",
    "process.hung": "Engine hung: health answers, but no token is generated",
    "process.engine_dead": "Process: the engine core died (health fails, requests 500)",
    "server.5xx": "Server errors (500/502/503/504)",
    "gpu.thermal": "GPU: thermal or power throttling",
    "gpu.saturated": "GPU: compute saturated",
    "gpu.numa": "GPU: CPU/NUMA placement",
    "network.tls": "Network: TLS/certificate",
    "client.error": "Client-side error",
    "config.model_name": "Configuration: the served model name is not what the server lists",
    "config.version": "Configuration: the engine version differs from the inventory",
    "probe.metrics": "Monitoring: the engine's metrics cannot be read",
    "probe.error": "Probe: the request failed in an unexpected way",
    "probe.garbage": "Probe: the server answered something that is not its API",
}


def label(category: str) -> str:
    return CATEGORIES.get(category, category)


def family(category: str) -> str:
    """The top of the taxonomy: timeout, rate_limit, oom, cuda, model_loading, ..."""
    return category.split(".", 1)[0]
