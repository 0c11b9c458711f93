"""One vLLM launch, described once and rendered four ways (a `vllm serve` command, `docker
run`, a Kubernetes Deployment and Service, a systemd unit with a watchdog): the fields, the
guide's presets, the validated spec and the argument list for its vLLM version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from diagnostics.configgen import safety, vllm_flags
from diagnostics.configgen.base import Check, ConfigFile, Field, Generator, Section, flag
from fleet import gpu_catalog

V = vllm_flags.SUPPORTED_VERSIONS

MODEL, GPUS, MEMORY = (
    pgettext_lazy("config generator", "Model"),
    pgettext_lazy("config generator", "GPUs"),
    pgettext_lazy("config generator", "Memory"),
)
SCHEDULING, SERVER = (
    pgettext_lazy("config generator", "Scheduling"),
    pgettext_lazy("config generator", "Server"),
)
DEPLOYMENT, KUBERNETES, WATCHDOG = (
    pgettext_lazy("config generator", "Deployment"),
    "Kubernetes",
    pgettext_lazy("config generator", "Watchdog"),
)


def shared_memory_fields(group: str) -> tuple[Field, Field]:
    """The container's `/dev/shm` size and how docker gives it: the same two fields for every
    engine's container (NCCL shares tensors through /dev/shm)."""
    return (
        Field(
            "shm_size_gib",
            "`/dev/shm` (GiB)",
            "8",
            kind="int",
            help=gettext_lazy("8 GiB for multi-GPU: NCCL shares tensors through /dev/shm."),
            group=group,
        ),
        Field(
            "docker_ipc",
            gettext_lazy("docker shared memory"),
            "shm-size",
            gettext_lazy(
                "--shm-size gives the container its own /dev/shm of that size; --ipc=host shares the host's."
            ),
            kind="choice",
            choices=(("shm-size", "--shm-size"), ("host", "--ipc=host")),
            group=group,
        ),
    )


LAUNCH_FIELDS: tuple[Field, ...] = (
    Field(
        "model",
        pgettext_lazy("config generator", "Model"),
        "Qwen/Qwen3-8B",
        gettext_lazy("Hugging Face id or a local path."),
        group=MODEL,
    ),
    Field(
        "served_model_name", "`--served-model-name`", "", gettext_lazy("Blank: the model id."), group=MODEL
    ),
    Field(
        "vllm_version",
        gettext_lazy("vLLM version"),
        vllm_flags.DEFAULT_VERSION,
        kind="choice",
        choices=tuple((v, v) for v in V),
        group=MODEL,
        help=gettext_lazy("Only flags this version accepts are written."),
    ),
    Field(
        "dtype",
        "`--dtype`",
        "auto",
        kind="choice",
        choices=(("auto", "auto"), ("bfloat16", "bfloat16"), ("float16", "float16")),
        group=MODEL,
    ),
    Field(
        "quantization",
        "`--quantization`",
        "",
        kind="choice",
        choices=(
            ("", gettext_lazy("none / the checkpoint's")),
            ("fp8", "fp8"),
            ("awq", "awq"),
            ("gptq", "gptq"),
            ("bitsandbytes", "bitsandbytes"),
        ),
        group=MODEL,
    ),
    Field("trust_remote_code", "`--trust-remote-code`", "off", kind="bool", group=MODEL),
    Field(
        "gpu_model",
        pgettext_lazy("config generator", "GPU model"),
        "",
        gettext_lazy("For the sizing cross-check of max_num_seqs and max_model_len."),
        kind="choice",
        choices=(("", gettext_lazy("not checked")), *gpu_catalog.choices()),
        group=GPUS,
    ),
    Field("tensor_parallel_size", "`--tensor-parallel-size`", "1", kind="int", group=GPUS),
    Field("pipeline_parallel_size", "`--pipeline-parallel-size`", "1", kind="int", group=GPUS),
    Field(
        "gpu_devices",
        pgettext_lazy("config generator", "GPU devices"),
        "0",
        gettext_lazy(
            "GPU indexes, like 0,1 (docker --gpus, CUDA_VISIBLE_DEVICES). Blank: the first TP × PP GPUs."
        ),
        group=GPUS,
    ),
    Field("gpu_memory_utilization", "`--gpu-memory-utilization`", "0.9", kind="float", group=MEMORY),
    Field(
        "max_model_len",
        "`--max-model-len`",
        "32768",
        kind="int",
        help=gettext_lazy("Blank: the model's."),
        group=MEMORY,
    ),
    Field(
        "kv_cache_dtype",
        "`--kv-cache-dtype`",
        "auto",
        kind="choice",
        choices=(("auto", "auto"), ("fp8", "fp8")),
        group=MEMORY,
    ),
    Field(
        "max_num_seqs",
        "`--max-num-seqs`",
        "",
        kind="int",
        help=gettext_lazy("Blank: vLLM's default."),
        group=SCHEDULING,
    ),
    Field("max_num_batched_tokens", "`--max-num-batched-tokens`", "", kind="int", group=SCHEDULING),
    Field(
        "enable_chunked_prefill",
        gettext_lazy("chunked prefill"),
        "on",
        kind="bool",
        group=SCHEDULING,
        help=gettext_lazy("On by default from 0.8 (V1); written only where it is not the default."),
    ),
    Field(
        "enable_prefix_caching",
        pgettext_lazy("config generator", "prefix caching"),
        "on",
        kind="bool",
        group=SCHEDULING,
        help=gettext_lazy("On by default from 0.8 (V1)."),
    ),
    Field("enforce_eager", "`--enforce-eager`", "off", kind="bool", group=SCHEDULING),
    Field("host", "`--host`", "0.0.0.0", group=SERVER),
    Field("port", "`--port`", "8000", kind="int", group=SERVER),
    Field(
        "api_key_env",
        gettext_lazy("API key variable"),
        "VLLM_API_KEY",
        gettext_lazy("vLLM reads VLLM_API_KEY itself; the key is never written into a file."),
        group=SERVER,
    ),
    Field("log_requests", gettext_lazy("log each request"), "off", kind="bool", group=SERVER),
    Field(
        "longest_generation_s",
        gettext_lazy("Longest generation (s)"),
        "120",
        gettext_lazy(
            "The engine-side budget of the timeout chain (max_tokens / tokens per second); "
            "the gateway and client timeouts must exceed it."
        ),
        kind="float",
        group=SERVER,
    ),
    Field(
        "name",
        pgettext_lazy("config generator", "Name"),
        "vllm",
        gettext_lazy("Container, Kubernetes and systemd name (a-z, 0-9, -)."),
        group=DEPLOYMENT,
    ),
    Field(
        "image",
        pgettext_lazy("config generator", "Image"),
        "",
        gettext_lazy("Blank: vllm/vllm-openai for the version."),
        group=DEPLOYMENT,
    ),
    Field(
        "model_cache",
        gettext_lazy("Model cache path"),
        "/models",
        gettext_lazy("Host path (docker, systemd) with the weights."),
        group=DEPLOYMENT,
    ),
    Field(
        "memory_limit_gib",
        gettext_lazy("Memory limit (GiB)"),
        "72",
        kind="int",
        help=gettext_lazy("Container limit: the load peak + 20 % (sizing)."),
        group=DEPLOYMENT,
    ),
    Field("memory_request_gib", gettext_lazy("Memory request (GiB)"), "32", kind="int", group=DEPLOYMENT),
    *shared_memory_fields(DEPLOYMENT),
    Field("namespace", gettext_lazy("Kubernetes namespace"), "llm", group=KUBERNETES),
    Field("replicas", pgettext_lazy("config generator", "Replicas"), "1", kind="int", group=KUBERNETES),
    Field("model_pvc", gettext_lazy("Model cache PVC"), "model-cache", group=KUBERNETES),
    Field(
        "api_key_secret",
        gettext_lazy("API key Secret"),
        "",
        gettext_lazy("Blank: no key. The Secret's key is api-key."),
        group=KUBERNETES,
    ),
    Field(
        "startup_minutes",
        gettext_lazy("Start-up allowance (min)"),
        "15",
        gettext_lazy("Loading and profiling take minutes; the startup probe allows this long."),
        kind="int",
        group=KUBERNETES,
    ),
    Field("service_user", gettext_lazy("systemd user"), "vllm", group="systemd"),
    Field("venv", gettext_lazy("Python venv"), "/opt/vllm/venv", group="systemd"),
    Field("health_interval_s", gettext_lazy("Health check every (s)"), "15", kind="int", group=WATCHDOG),
    Field(
        "failures_before_restart", gettext_lazy("Failures before restart"), "3", kind="int", group=WATCHDOG
    ),
    Field(
        "restart_cooldown_s",
        gettext_lazy("Cooldown after a restart (s)"),
        "300",
        kind="int",
        group=WATCHDOG,
        help=gettext_lazy("Loading takes minutes: no second restart before this."),
    ),
    Field(
        "restart_budget_per_hour", gettext_lazy("Restarts per hour at most"), "3", kind="int", group=WATCHDOG
    ),
    Field(
        "alert_webhook",
        gettext_lazy("Alert webhook URL"),
        "",
        gettext_lazy("Blank: no alerts. Gets a JSON POST."),
        group=WATCHDOG,
    ),
)

# The fieldsets the four launch forms share; each generator adds its own (container,
# Kubernetes, systemd and watchdog) and leaves out what its files do not use.
MODEL_SECTION = Section(
    gettext_lazy("Model & engine"), ("model", "vllm_version", "served_model_name", "dtype", "quantization")
)
MEMORY_SECTION = Section(
    gettext_lazy("Memory & batching"),
    ("gpu_memory_utilization", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "kv_cache_dtype"),
)
ENGINE_FLAGS_SECTION = Section(
    gettext_lazy("Engine flags"),
    ("enable_chunked_prefill", "enable_prefix_caching", "enforce_eager", "trust_remote_code", "log_requests"),
    advanced=True,
)


def gpu_section(*, devices: bool = True) -> Section:
    """Parallelism and the GPUs to use; Kubernetes schedules GPUs by count, not index."""
    names = ("tensor_parallel_size", "pipeline_parallel_size", "gpu_devices", "gpu_model")
    return Section(GPUS, tuple(n for n in names if devices or n != "gpu_devices"))


# The guide's profiles (3.2) and the model combinations of its appendix B, corrected
# (no --request-timeout, --swap-space or --disable-log-requests where they do not exist).
PRESETS: dict[str, dict[str, str]] = {
    "low_latency": {
        "gpu_memory_utilization": "0.85",
        "max_num_seqs": "32",
        "max_num_batched_tokens": "8192",
        "max_model_len": "32768",
    },
    "balanced": {
        "gpu_memory_utilization": "0.88",
        "max_num_seqs": "200",
        "max_num_batched_tokens": "32768",
        "max_model_len": "16384",
    },
    "high_throughput": {
        "gpu_memory_utilization": "0.92",
        "max_num_seqs": "512",
        "max_num_batched_tokens": "65536",
        "max_model_len": "8192",
    },
    "small_model": {
        "gpu_memory_utilization": "0.85",
        "max_num_seqs": "32",
        "max_model_len": "32768",
        "tensor_parallel_size": "1",
        "gpu_devices": "0",
        "shm_size_gib": "1",
    },
    "medium_model": {
        "gpu_memory_utilization": "0.88",
        "max_num_seqs": "128",
        "max_model_len": "16384",
        "tensor_parallel_size": "1",
        "gpu_devices": "0",
        "shm_size_gib": "1",
    },
    "large_model": {
        "tensor_parallel_size": "2",
        "gpu_devices": "0,1",
        "gpu_memory_utilization": "0.9",
        "max_num_seqs": "200",
        "max_model_len": "16384",
        "shm_size_gib": "8",
    },
    "very_large_model": {
        "tensor_parallel_size": "4",
        "gpu_devices": "0,1,2,3",
        "gpu_memory_utilization": "0.92",
        "max_num_seqs": "256",
        "max_model_len": "8192",
        "shm_size_gib": "8",
    },
}
PRESET_LABELS = {
    "low_latency": gettext_lazy("Low latency (the guide's serving profiles)"),
    "balanced": gettext_lazy("Balanced (the guide's serving profiles)"),
    "high_throughput": gettext_lazy("High throughput (the guide's serving profiles)"),
    "small_model": gettext_lazy("Small model < 10B, one GPU (the guide's model sizes table)"),
    "medium_model": gettext_lazy("Medium model 10-30B, one A100 80G (the guide's model sizes table)"),
    "large_model": gettext_lazy("Large model 30-70B, two A100 80G (the guide's model sizes table)"),
    "very_large_model": gettext_lazy("Very large model > 70B, four A100 80G (the guide's model sizes table)"),
}


@dataclass(frozen=True, kw_only=True)
class LaunchSpec:
    model: str
    served_model_name: str
    version: tuple[int, int]
    version_label: str
    dtype: str
    quantization: str
    trust_remote_code: bool
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpu_devices: tuple[int, ...]
    gpu_memory_utilization: float
    max_model_len: int | None
    kv_cache_dtype: str
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    enforce_eager: bool
    host: str
    port: int
    api_key_env: str
    log_requests: bool
    longest_generation_s: float
    name: str
    image: str
    model_cache: str
    memory_limit_gib: int
    memory_request_gib: int
    shm_size_gib: int
    namespace: str
    replicas: int
    model_pvc: str
    api_key_secret: str
    startup_minutes: int
    service_user: str
    venv: str
    health_interval_s: int
    failures_before_restart: int
    restart_cooldown_s: int
    restart_budget_per_hour: int
    alert_webhook: str
    gpu_model: str = ""
    docker_ipc: str = "shm-size"

    @property
    def gpu_count(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def v1(self) -> bool:
        return self.version >= (0, 8)


def _optional_int(field: str, value: str, **limits: int) -> int | None:
    return safety.integer(field, value, **limits) if value.strip() else None


def build(values: Mapping[str, str]) -> LaunchSpec:
    version = vllm_flags.parse(values["vllm_version"])
    tp = safety.integer("tensor_parallel_size", values["tensor_parallel_size"], minimum=1, maximum=64)
    pp = safety.integer("pipeline_parallel_size", values["pipeline_parallel_size"], minimum=1, maximum=64)
    devices = tuple(
        safety.integer("gpu_devices", d, maximum=63)
        for d in values["gpu_devices"].replace(" ", "").split(",")
        if d
    ) or tuple(range(tp * pp))  # blank: the first GPUs, so a form that does not show it still works
    if len(devices) != tp * pp:
        raise safety.UnsafeValue(
            f"gpu_devices: {len(devices)} device(s) listed for TP {tp} x PP {pp} = {tp * pp} GPUs"
        )
    image = values["image"].strip() or f"vllm/vllm-openai:v{version[0]}.{version[1]}.0"
    secret = values["api_key_secret"].strip()
    return LaunchSpec(
        model=safety.token("model", values["model"]),
        served_model_name=safety.token("served_model_name", values["served_model_name"])
        if values["served_model_name"].strip()
        else "",
        version=version,
        version_label=values["vllm_version"],
        dtype=values["dtype"],
        quantization=values["quantization"],
        trust_remote_code=flag(values["trust_remote_code"]),
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        gpu_devices=devices,
        gpu_memory_utilization=safety.number(
            "gpu_memory_utilization", values["gpu_memory_utilization"], minimum=0.05, maximum=1.0
        ),
        max_model_len=_optional_int("max_model_len", values["max_model_len"], minimum=16, maximum=10_000_000),
        kv_cache_dtype=values["kv_cache_dtype"],
        max_num_seqs=_optional_int("max_num_seqs", values["max_num_seqs"], minimum=1, maximum=65536),
        max_num_batched_tokens=_optional_int(
            "max_num_batched_tokens", values["max_num_batched_tokens"], minimum=16, maximum=10_000_000
        ),
        enable_chunked_prefill=flag(values["enable_chunked_prefill"]),
        enable_prefix_caching=flag(values["enable_prefix_caching"]),
        enforce_eager=flag(values["enforce_eager"]),
        host=safety.host("host", values["host"]),
        port=safety.port_number("port", values["port"]),
        api_key_env=safety.env_name("api_key_env", values["api_key_env"]),
        log_requests=flag(values["log_requests"]),
        longest_generation_s=safety.seconds(
            "longest_generation_s", values["longest_generation_s"], minimum=1
        ),
        name=safety.name("name", values["name"]),
        image=safety.token("image", image),
        model_cache=safety.path("model_cache", values["model_cache"]),
        memory_limit_gib=safety.integer(
            "memory_limit_gib", values["memory_limit_gib"], minimum=1, maximum=4096
        ),
        memory_request_gib=safety.integer(
            "memory_request_gib", values["memory_request_gib"], minimum=1, maximum=4096
        ),
        shm_size_gib=safety.integer("shm_size_gib", values["shm_size_gib"], minimum=1, maximum=1024),
        namespace=safety.name("namespace", values["namespace"]),
        replicas=safety.integer("replicas", values["replicas"], minimum=0, maximum=100),
        model_pvc=safety.name("model_pvc", values["model_pvc"]),
        api_key_secret=safety.name("api_key_secret", secret) if secret else "",
        startup_minutes=safety.integer("startup_minutes", values["startup_minutes"], minimum=1, maximum=120),
        service_user=safety.name("service_user", values["service_user"]),
        venv=safety.path("venv", values["venv"]),
        health_interval_s=safety.integer(
            "health_interval_s", values["health_interval_s"], minimum=1, maximum=3600
        ),
        failures_before_restart=safety.integer(
            "failures_before_restart", values["failures_before_restart"], minimum=1, maximum=100
        ),
        restart_cooldown_s=safety.integer(
            "restart_cooldown_s", values["restart_cooldown_s"], minimum=0, maximum=86400
        ),
        restart_budget_per_hour=safety.integer(
            "restart_budget_per_hour", values["restart_budget_per_hour"], minimum=1, maximum=60
        ),
        alert_webhook=safety.url("alert_webhook", values["alert_webhook"])
        if values["alert_webhook"].strip()
        else "",
        gpu_model=values["gpu_model"],
        docker_ipc=values["docker_ipc"],
    )


def serve_args(spec: LaunchSpec) -> tuple[list[str], list[str]]:
    """The flags after the model, for the spec's version, and notes on what was left out
    (English: the files carry them)."""
    return vllm_flags.emit(spec.version, _wanted(spec))


def _wanted(spec: LaunchSpec) -> list[tuple[str, str | None]]:
    wanted: list[tuple[str, str | None]] = []
    if spec.served_model_name:
        wanted.append(("--served-model-name", spec.served_model_name))
    wanted += [("--host", spec.host), ("--port", str(spec.port))]
    if spec.dtype != "auto":
        wanted.append(("--dtype", spec.dtype))
    if spec.quantization:
        wanted.append(("--quantization", spec.quantization))
    if spec.trust_remote_code:
        wanted.append(("--trust-remote-code", None))
    if spec.tensor_parallel_size > 1:
        wanted.append(("--tensor-parallel-size", str(spec.tensor_parallel_size)))
    if spec.pipeline_parallel_size > 1:
        wanted.append(("--pipeline-parallel-size", str(spec.pipeline_parallel_size)))
    wanted.append(("--gpu-memory-utilization", f"{spec.gpu_memory_utilization:g}"))
    for name, value in (
        ("--max-model-len", spec.max_model_len),
        ("--max-num-seqs", spec.max_num_seqs),
        ("--max-num-batched-tokens", spec.max_num_batched_tokens),
    ):
        if value is not None:
            wanted.append((name, str(value)))
    if spec.kv_cache_dtype != "auto":
        wanted.append(("--kv-cache-dtype", spec.kv_cache_dtype))
    wanted += _defaults_that_differ(spec)
    if spec.enforce_eager:
        wanted.append(("--enforce-eager", None))
    return wanted


def _defaults_that_differ(spec: LaunchSpec) -> list[tuple[str, str | None]]:
    """Chunked prefill, prefix caching and request logging, written only where the version's
    default is not what the spec wants."""
    wanted: list[tuple[str, str | None]] = []
    if spec.enable_chunked_prefill and not spec.v1:
        wanted.append(("--enable-chunked-prefill", None))
    if spec.enable_prefix_caching and not spec.v1:
        wanted.append(("--enable-prefix-caching", None))
    if not spec.enable_prefix_caching and spec.v1:
        wanted.append(("--no-enable-prefix-caching", None))
    logs_by_default = spec.version < (0, 10)
    if logs_by_default and not spec.log_requests:
        wanted.append(("--disable-log-requests", None))
    if not logs_by_default and spec.log_requests:
        wanted.append(("--enable-log-requests", None))
    return wanted


def generator(
    *,
    key: str,
    label: str,
    description: str,
    render: Callable[[LaunchSpec], list[ConfigFile]],
    sections: tuple[Section, ...],
    build: Callable[[Mapping[str, str]], LaunchSpec] = build,
    defaults: Mapping[str, str] | None = None,
) -> Generator:
    """A launch generator: the shared fields (with its own `defaults`, if any), presets and
    cross-checks, its own render and the fields its form shows; the others keep their
    defaults, so one URL renders all four."""
    return Generator(
        key=key,
        label=label,
        description=description,
        fields=tuple(replace(f, default=(defaults or {}).get(f.name, f.default)) for f in LAUNCH_FIELDS),
        build=build,
        render=render,
        checks=partial(checks, shown=frozenset(name for s in sections for name in s.fields)),
        presets=PRESETS,
        preset_labels=PRESET_LABELS,
        sections=sections,
    )


def checks(spec: LaunchSpec, *, shown: frozenset[str] | None = None) -> list[Check]:
    """What the version left out, then the launch's cross-checks."""
    notes = vllm_flags.notes_shown(spec.version, _wanted(spec))
    return [Check("ok", note) for note in notes] + launch_checks(spec, shown=shown)


def launch_checks(spec: LaunchSpec, *, shown: frozenset[str] | None = None) -> list[Check]:
    """The cross-checks; those on a setting the generator does not show (`shown`; None: all)
    are left out, as it never reaches that generator's files: no Kubernetes memory request
    beside a docker command, no /dev/shm size for a host's own."""
    checks = sizing_checks(spec)
    if shown is None or "shm_size_gib" in shown:
        checks += _shm_checks(spec)
    if (shown is None or "memory_request_gib" in shown) and spec.memory_request_gib > spec.memory_limit_gib:
        checks.append(
            Check(
                "error",
                _("Memory request above the limit"),
                _("Kubernetes refuses such a pod."),
                _("raise the limit"),
            )
        )
    if spec.gpu_memory_utilization > 0.95:
        checks.append(
            Check(
                "warning",
                _("gpu_memory_utilization %(value)s leaves little for CUDA graphs and other processes")
                % {"value": f"{spec.gpu_memory_utilization:g}"},
                _("Graph capture and the sampler's warm-up run outside the budget before 0.20."),
                "0.9-0.92",
            )
        )
    return checks


def _shm_checks(spec: LaunchSpec) -> list[Check]:
    checks = []
    if spec.gpu_count > 1 and spec.shm_size_gib < 8:
        checks.append(
            Check(
                "warning",
                _("/dev/shm of %(size)s GiB for %(gpus)s GPUs")
                % {"size": spec.shm_size_gib, "gpus": spec.gpu_count},
                _(
                    "Tensor-parallel workers exchange through shared memory; NCCL aborts when it runs out "
                    "(guide 2.5.3)."
                ),
                _("shm_size_gib 8 (or --ipc=host)"),
            )
        )
    return checks


def sizing_checks(spec: LaunchSpec) -> list[Check]:
    """max_num_seqs and max_model_len against the sizing of the target GPUs, when the GPU
    model is given and the model is in the shipped catalogue."""
    from diagnostics.sizing import catalog
    from diagnostics.sizing.calculator import SizingSpec, SpecError, compute

    if not spec.gpu_model:
        return []
    entry = catalog.find(spec.model, catalog.shipped())
    if entry is None:
        return [
            Check(
                "warning",
                _("Not sized: %(model)s is not in the shipped sizing catalogue") % {"model": spec.model},
            )
        ]
    try:
        sized = compute(
            SizingSpec(
                arch=entry.architecture(),
                gpu=gpu_catalog.get(spec.gpu_model),
                gpus=spec.gpu_count,
                tensor_parallel_size=spec.tensor_parallel_size,
                pipeline_parallel_size=spec.pipeline_parallel_size,
                gpu_memory_utilization=spec.gpu_memory_utilization,
                max_model_len=spec.max_model_len,
                max_num_seqs=spec.max_num_seqs,
                max_num_batched_tokens=spec.max_num_batched_tokens,
                quantization=spec.quantization or None,
                kv_cache_dtype=spec.kv_cache_dtype,
                vllm_version=_sizing_version(spec.version),
                enforce_eager=spec.enforce_eager,
            )
        )
    except (SpecError, ValueError) as exc:
        return [Check("warning", _("Not sized: %(why)s") % {"why": exc})]
    if sized.error:
        return [
            Check(
                "error",
                _("vLLM would not start with these flags"),
                sized.error.message,
                "; ".join(sized.error.fixes),
            )
        ]
    seqs, fit = sized.resolved.max_num_seqs, sized.concurrency_at_average
    checks = [
        Check(
            "ok",
            _(
                "Sizing on %(gpus)s x %(gpu)s: %(tokens)s tokens of KV cache, %(requests)s requests at "
                "max_model_len %(max_model_len)s"
            )
            % {
                "gpus": spec.gpu_count,
                "gpu": spec.gpu_model,
                "tokens": f"{sized.capacity.tokens:,}",
                "requests": f"{sized.capacity.max_concurrency:.1f}",
                "max_model_len": f"{sized.resolved.max_model_len:,}",
            },
        )
    ]
    if fit < seqs:
        checks.append(
            Check(
                "warning",
                _(
                    "max_num_seqs %(seqs)s is above the %(fit)s requests of %(tokens)s tokens the KV cache "
                    "holds"
                )
                % {"seqs": seqs, "fit": f"{fit:.0f}", "tokens": f"{sized.average_context:,}"},
                _(
                    "The rest wait for KV blocks or preempt others "
                    "(guide 2.3.2: available KV / KV per request)."
                ),
                f"--max-num-seqs {max(int(fit * 0.85), 1)}",
            )
        )
    return checks


def _sizing_version(version: tuple[int, int]) -> str:
    from diagnostics.sizing.versions import NEWEST, OLDEST

    major, minor = min(max(version, OLDEST), NEWEST)
    return f"{major}.{minor}"
