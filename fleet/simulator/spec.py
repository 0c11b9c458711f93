"""What one simulated instance is: its engine, version, launch arguments, GPUs and load.

`InstanceSpec` is frozen; fields left as None are derived in `__post_init__` (the version
from the engine, weights from the parameter count, the KV block count from GPU memory), so
a built spec always holds numbers. The KV sizing here is deliberately simple:
    KV bytes = GPU memory x gpu_memory_utilization x gpu_count - weights - activations
    blocks   = KV bytes / (KV bytes per token x block_size)
(corrections #1: utilization is the share of *total* memory, weights included).

vLLM options that change what /metrics shows (docs/vllm-metrics.md): api_server_count
(--api-server-count; above 1 the page comes from prometheus_client's multiprocess mode),
num_speculative_tokens (--speculative-config; 0 is off) with the draft acceptance it
reaches, lora_adapters (--enable-lora with --lora-modules) and max_loras (--max-loras),
dev_mode (VLLM_SERVER_DEV_MODE=1: the /sleep, /wake_up and /is_sleeping routes) and
show_hidden_metrics_for_version (--show-hidden-metrics-for-version).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from fleet import gpu_catalog
from fleet.simulator import vllm_versions
from fleet.simulator.model_sizes import kv_bytes_per_token_guess

ENGINES = ("vllm", "tgi", "ollama", "sglang")
DEFAULT_VERSIONS = {"vllm": "0.11.2", "tgi": "3.3.4", "ollama": "0.12.3", "sglang": "0.5.10"}
GIB = 1024**3
MIB = 1024**2
_FP8_KV = {"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"}


class SpecError(ValueError):
    """A spec field is missing or wrong; the message names the field."""


@dataclass(frozen=True, kw_only=True)
class LoadProfile:
    """Background traffic: Poisson arrivals from a set of client IPs.

    Rates, token counts and timeouts are real (per real second), also in scenarios whose
    timeline is compressed. `timeout_s` makes the synthetic clients give up (the request is
    aborted, finished_reason "abort"), as clients behind a gateway do.
    """

    requests_per_s: float = 0.0
    mean_prompt_tokens: int = 512
    mean_output_tokens: int = 128
    max_tokens: int | None = None  # None: 4 x mean_output_tokens
    clients: tuple[str, ...] = ("10.0.3.12", "10.0.3.15")
    timeout_s: float | None = None
    prefix_hit_rate: float = 0.0  # share of prompt tokens found in the prefix cache
    spread: float = 0.5  # coefficient of variation of prompt and output lengths
    stream: str = "baseline"

    def __post_init__(self) -> None:
        _check(self.requests_per_s >= 0, "load.requests_per_s", "must be >= 0")
        _check(self.mean_prompt_tokens >= 1, "load.mean_prompt_tokens", "must be >= 1")
        _check(self.mean_output_tokens >= 1, "load.mean_output_tokens", "must be >= 1")
        _check(0 <= self.prefix_hit_rate <= 1, "load.prefix_hit_rate", "must be between 0 and 1")
        _check(self.timeout_s is None or self.timeout_s > 0, "load.timeout_s", "must be > 0")
        _check(bool(self.clients), "load.clients", "needs at least one client IP")
        _check(0 < self.spread <= 2, "load.spread", "must be in (0, 2]")

    @property
    def effective_max_tokens(self) -> int:
        return self.max_tokens or 4 * self.mean_output_tokens


@dataclass(frozen=True, kw_only=True)
class GpuSlot:
    """One GPU the instance runs on, as the inventory knows it."""

    index: int
    uuid: str = ""
    pci_bus_id: str = ""
    numa_node: int | None = None


@dataclass(frozen=True, kw_only=True)
class InstanceSpec:
    name: str
    engine: str = "vllm"
    version: str = ""  # "": the engine's default (DEFAULT_VERSIONS)
    port: int = 0  # 0: any free port, chosen when the instance first listens
    host: str = "127.0.0.1"
    served_model_name: str = "meta-llama/Llama-3.1-8B-Instruct"
    max_model_len: int = 32768
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    gpu_memory_utilization: float = 0.9
    gpu_model: str = "h100-80gb"
    gpu_memory_mib: int | None = None  # None: the catalogue's figure
    gpu_count: int = 1
    block_size: int = 16
    kv_cache_dtype: str = "auto"
    enable_prefix_caching: bool | None = None  # None: on for V1 engines and TGI
    params_b: float = 8.0
    active_params_b: float | None = None  # mixture of experts: parameters used per token
    weight_bytes_per_param: float = 2.0
    weights_gib: float | None = None  # None: params_b x bytes per param
    kv_bytes_per_token: int | None = None  # at 16-bit KV; None: guessed from params_b
    num_gpu_blocks: int | None = None  # None: derived from memory (module docstring)
    reasoning: bool = False  # streams reasoning_content before content
    api_key: str = ""  # when set, /v1/* needs "Authorization: Bearer <key>"
    max_concurrent_requests: int = 128  # TGI's --max-concurrent-requests (429 beyond it)
    driver_version: str = "570.133.20"
    cuda_version: str = "12.8"
    gpus: tuple[GpuSlot, ...] = ()
    gpu_host: str = ""  # the inventory host it runs on: GET /_sim/hosts/{gpu_host}/dcgm serves its GPUs
    api_server_count: int = 1  # vLLM --api-server-count
    num_speculative_tokens: int = 0  # vLLM --speculative-config; 0: no speculative decoding
    spec_acceptance: float = 0.7  # chance each draft token is accepted, given the ones before it
    lora_adapters: tuple[str, ...] = ()  # vLLM --lora-modules names; (): LoRA off
    max_loras: int = 1  # vLLM --max-loras: adapters that can run at once
    dev_mode: bool = False  # VLLM_SERVER_DEV_MODE=1: /sleep, /wake_up, /is_sleeping
    show_hidden_metrics_for_version: str = ""  # vLLM --show-hidden-metrics-for-version
    load: LoadProfile = field(default_factory=LoadProfile)
    seed: int = 0

    def __post_init__(self) -> None:
        _check(bool(self.name), "name", "is required")
        _check(self.engine in ENGINES, "engine", f"must be one of {', '.join(ENGINES)}")
        _check(0 <= self.port <= 65535, "port", "must be between 0 and 65535")
        _check(self.max_model_len >= 16, "max_model_len", "must be >= 16")
        _check(self.max_num_seqs >= 1, "max_num_seqs", "must be >= 1")
        _check(self.max_num_batched_tokens >= 1, "max_num_batched_tokens", "must be >= 1")
        _check(0 < self.gpu_memory_utilization <= 1, "gpu_memory_utilization", "must be in (0, 1]")
        _check(self.gpu_count >= 1, "gpu_count", "must be >= 1")
        _check(self.block_size >= 1, "block_size", "must be >= 1")
        _check(self.params_b > 0, "params_b", "must be > 0")
        _check(1 <= self.api_server_count <= 64, "api_server_count", "must be between 1 and 64")
        _check(0 <= self.num_speculative_tokens <= 32, "num_speculative_tokens", "must be between 0 and 32")
        _check(0 <= self.spec_acceptance <= 1, "spec_acceptance", "must be between 0 and 1")
        _check(self.max_loras >= 1, "max_loras", "must be >= 1")
        _check(
            all(name and "," not in name for name in self.lora_adapters)
            and len(set(self.lora_adapters)) == len(self.lora_adapters),
            "lora_adapters",
            "must be distinct names without commas",
        )
        try:
            gpu_catalog.get(self.gpu_model)
        except KeyError as exc:
            raise SpecError(f"gpu_model: {exc.args[0]}") from None
        self._derive()

    def _derive(self) -> None:
        version = self.version or DEFAULT_VERSIONS[self.engine]
        if self.engine == "vllm":
            try:
                vllm_versions.parse_version(version)
            except ValueError:
                raise SpecError(f"version: {version!r} is not a version like 0.11.2") from None
        set_ = object.__setattr__  # frozen: derived fields are filled once, here
        set_(self, "version", version)
        if self.engine == "vllm":
            _check(
                vllm_versions.valid_show_hidden(version, self.show_hidden_metrics_for_version),
                "show_hidden_metrics_for_version",
                f"vLLM accepts only the release before {version} (e.g. 0.10 for 0.11.x)",
            )
        set_(self, "active_params_b", self.active_params_b or self.params_b)
        if self.weights_gib is None:
            set_(self, "weights_gib", round(self.params_b * 1e9 * self.weight_bytes_per_param / GIB, 2))
        if self.kv_bytes_per_token is None:
            set_(self, "kv_bytes_per_token", kv_bytes_per_token_guess(self.params_b, self.served_model_name))
        if self.enable_prefix_caching is None:
            set_(self, "enable_prefix_caching", self._prefix_caching_default())
        if self.num_gpu_blocks is None:
            set_(self, "num_gpu_blocks", self._derived_blocks())
        _check(self.num_gpu_blocks >= 1, "num_gpu_blocks", "must be >= 1")

    def _prefix_caching_default(self) -> bool:
        if self.engine == "vllm":
            return vllm_versions.metric_generation(self.version) is not vllm_versions.MetricGeneration.V0
        return self.engine == "tgi"

    def _derived_blocks(self) -> int:
        total = self.gpu_total_mib * MIB * self.gpu_memory_utilization * self.gpu_count
        activations = (0.5 * GIB + self.max_num_batched_tokens * 64 * 1024) * self.gpu_count
        budget = total - self.weights_gib * GIB - activations
        per_block = self.kv_bytes_per_token_effective * self.block_size
        # vLLM refuses to start when one max-length request does not fit; the simulator
        # starts anyway with exactly that much, so a tight spec stays usable.
        floor = math.ceil(self.max_model_len / self.block_size)
        return max(floor, int(budget // per_block))

    @property
    def gpu_total_mib(self) -> int:
        return self.gpu_memory_mib or gpu_catalog.get(self.gpu_model).memory_mib

    @property
    def kv_bytes_per_token_effective(self) -> int:
        factor = 0.5 if self.kv_cache_dtype in _FP8_KV else 1.0
        return int(self.kv_bytes_per_token * factor)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def with_port(self, port: int) -> InstanceSpec:
        return replace(self, port=port)


def _check(ok: bool, field_name: str, message: str) -> None:
    if not ok:
        raise SpecError(f"{field_name}: {message}")


# A synthetic fleet: mostly vLLM across the four metric generations, some TGI and Ollama.
_VLLM_VERSIONS = ("0.11.2", "0.10.1", "0.8.5", "0.12.0", "0.7.3", "0.11.0", "0.9.2")
_VLLM_MODELS = (
    ("meta-llama/Llama-3.1-8B-Instruct", 8.0, 1, "h100-80gb"),
    ("Qwen/Qwen2.5-7B-Instruct", 7.0, 1, "l40s"),
    ("Qwen/Qwen3-32B", 32.0, 2, "h100-80gb"),
    ("mistralai/Mistral-7B-Instruct-v0.3", 7.0, 1, "a100-80gb"),
)


def specs_for(
    n: int, base_port: int, *, requests_per_s: float | None = None, seed: int = 0
) -> list[InstanceSpec]:
    """n instances on base_port, base_port + 1, ...: 8 in 10 vLLM, 1 TGI, 1 Ollama.

    The default background load is light (0.1-0.6 requests/s each) so a large fleet idles
    cheaply; pass requests_per_s to set it for all of them.
    """
    return [_synthetic_spec(i, base_port + i if base_port else 0, requests_per_s, seed) for i in range(n)]


def _synthetic_spec(i: int, port: int, requests_per_s: float | None, seed: int) -> InstanceSpec:
    rate = requests_per_s if requests_per_s is not None else 0.1 + 0.1 * ((i * 7 + seed) % 6)
    load = LoadProfile(requests_per_s=rate, mean_prompt_tokens=600, mean_output_tokens=150)
    common = {"port": port, "load": load, "seed": seed * 100_003 + i}
    kind = i % 10
    if kind == 8:
        return InstanceSpec(
            name=f"sim-tgi-{i:04d}",
            engine="tgi",
            served_model_name="mistralai/Mistral-7B-Instruct-v0.3",
            params_b=7.0,
            gpu_model="a100-80gb",
            max_model_len=8192,
            max_num_seqs=128,
            **common,
        )
    if kind == 9:
        return InstanceSpec(
            name=f"sim-ollama-{i:04d}",
            engine="ollama",
            served_model_name="llama3.1:8b",
            weight_bytes_per_param=0.56,
            gpu_model="l40s",
            max_model_len=8192,
            max_num_seqs=4,
            **common,
        )
    model, params_b, gpu_count, gpu = _VLLM_MODELS[i % len(_VLLM_MODELS)]
    return InstanceSpec(
        name=f"sim-vllm-{i:04d}",
        version=_VLLM_VERSIONS[i % len(_VLLM_VERSIONS)],
        served_model_name=model,
        params_b=params_b,
        gpu_count=gpu_count,
        gpu_model=gpu,
        **common,
    )


LOOPBACK = {"127.0.0.1", "localhost", "::1"}
INVENTORY_LOAD = LoadProfile(requests_per_s=1.0, mean_prompt_tokens=800, mean_output_tokens=200)


def specs_from_inventory(*, load: LoadProfile = INVENTORY_LOAD) -> list[InstanceSpec]:
    """Specs for the enabled inventory instances whose base URL is on loopback.

    Those are the ones the simulator can stand in for (the demo fleet: 8101-8105). Launch
    arguments left blank take vLLM's defaults; the API key is read from the environment
    variable the inventory names, so the simulator and the probes agree on it.
    """
    from fleet.models import Instance  # Django is only needed for this source of specs

    rows = Instance.objects.enabled().select_related("host").prefetch_related("gpus").order_by("name")
    specs = []
    for row in rows:
        port = loopback_port(row.base_url)
        if port is not None:
            specs.append(_spec_from_row(row, port, load))
    return specs


def loopback_port(base_url: str) -> int | None:
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    if parts.hostname not in LOOPBACK:
        return None
    return parts.port or (443 if parts.scheme == "https" else 80)


def _spec_from_row(row, port: int, load: LoadProfile) -> InstanceSpec:
    import os

    from fleet.simulator.model_sizes import guess_model_size

    size = guess_model_size(name=row.served_model_name, quantization=row.quantization, dtype=row.dtype)
    gpus = sorted(row.gpus.all(), key=lambda g: g.index)
    first = gpus[0] if gpus else None
    return InstanceSpec(
        name=row.name,
        engine=row.engine,
        version=row.engine_version,
        port=port,
        served_model_name=row.served_model_name,
        max_model_len=row.max_model_len or 32768,
        max_num_seqs=row.max_num_seqs or (4 if row.engine == "ollama" else 256),
        max_num_batched_tokens=row.max_num_batched_tokens or 8192,
        gpu_memory_utilization=row.gpu_memory_utilization,
        gpu_model=first.model if first else "h100-80gb",
        gpu_memory_mib=first.memory_mib if first else None,
        gpu_count=max(len(gpus), row.parallel_size),
        kv_cache_dtype=row.kv_cache_dtype,
        enable_prefix_caching=row.enable_prefix_caching if row.engine == "vllm" else None,
        params_b=size.params_b,
        active_params_b=size.active_params_b,
        weight_bytes_per_param=size.weight_bytes_per_param,
        api_key=os.environ.get(row.api_key_env, "") if row.api_key_env else "",
        driver_version=row.host.driver_version or "570.133.20",
        cuda_version=row.host.cuda_version or "12.8",
        gpus=tuple(
            GpuSlot(index=g.index, uuid=g.uuid, pci_bus_id=g.pci_bus_id, numa_node=g.numa_node) for g in gpus
        ),
        gpu_host=row.host.name,
        load=load,
        seed=row.pk or 0,
    )
