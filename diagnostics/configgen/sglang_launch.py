"""`python -m sglang.launch_server` as a shell script, a `docker run` and a systemd unit.

The flags written are the ones SGLang's own argument parser defines (server_args.py),
recorded with their source in data/sglang_server_args.json; the tests parse every
generated command with a parser built from that file. Facts and sources:
docs/sglang-operations.md.

What differs from `vllm serve`: the static memory pool is `--mem-fraction-static` (the
weights and the KV cache pool; the rest of the GPU is left to activations and CUDA graphs),
the batch is capped by `--max-running-requests`, `/metrics` exists only with
`--enable-metrics`, and the API key can only be given as `--api-key` (SGLang reads no
environment variable for it).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, pgettext_lazy

from diagnostics.configgen import launch, safety
from diagnostics.configgen.base import Check, ConfigFile, Field, Generator, Section, flag
from fleet import gpu_catalog

FLAGS_FILE = Path(__file__).parent / "data" / "sglang_server_args.json"
PROGRAM = ("python3", "-m", "sglang.launch_server")
DEFAULT_PORT = 30000  # server_args.py: port = 30000
DEFAULT_IMAGE = "lmsysorg/sglang:latest"
# SGLang's hyperparameter tuning guide keeps 5-8 GB of each GPU outside the static pool.
HIGH_FRACTION = 0.95
LOW_FRACTION = 0.5


@cache
def server_args() -> dict[str, Any]:
    """The recorded flags of SGLang's server_args.py, their source and its version."""
    return json.loads(FLAGS_FILE.read_text(encoding="utf-8"))


def _flag_choices(name: str, wanted: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    known = server_args()["flags"][name]["choices"]
    missing = [value for value in wanted if value not in known]
    if missing:  # a choice SGLang does not define must never reach a command
        raise ValueError(f"{name} has no choice(s) {missing} in {FLAGS_FILE.name}")
    return tuple((value, value) for value in wanted)


CONTAINER = pgettext_lazy("config generator", "Container")
SERVICE = pgettext_lazy("config generator", "Service")

FIELDS: tuple[Field, ...] = (
    Field(
        "model",
        pgettext_lazy("config generator", "Model"),
        "Qwen/Qwen3-8B",
        gettext_lazy("Hugging Face id or a local path."),
        group=launch.MODEL,
    ),
    Field(
        "served_model_name",
        "`--served-model-name`",
        "",
        gettext_lazy("Blank: the model id."),
        group=launch.MODEL,
    ),
    Field(
        "dtype",
        "`--dtype`",
        "auto",
        kind="choice",
        choices=_flag_choices("--dtype", ("auto", "bfloat16", "float16")),
        group=launch.MODEL,
    ),
    Field(
        "quantization",
        "`--quantization`",
        "",
        kind="choice",
        choices=(
            ("", gettext_lazy("none / the checkpoint's")),
            *_flag_choices(
                "--quantization",
                ("fp8", "awq", "gptq", "awq_marlin", "gptq_marlin", "bitsandbytes", "w8a8_int8", "w8a8_fp8"),
            ),
        ),
        group=launch.MODEL,
    ),
    Field("trust_remote_code", "`--trust-remote-code`", "off", kind="bool", group=launch.MODEL),
    Field(
        "tensor_parallel_size",
        "`--tp-size`",
        "1",
        gettext_lazy("GPUs one copy of the model is split over; it must divide the model's attention heads."),
        kind="int",
        group=launch.GPUS,
    ),
    Field(
        "dp_size",
        "`--dp-size`",
        "1",
        gettext_lazy("Data-parallel copies of the model, each on its own `--tp-size` GPUs."),
        kind="int",
        group=launch.GPUS,
    ),
    Field(
        "gpu_devices",
        pgettext_lazy("config generator", "GPU devices"),
        "",
        gettext_lazy(
            "GPU indexes, like 0,1 (CUDA_VISIBLE_DEVICES, docker --gpus). Blank: the first TP × DP GPUs."
        ),
        group=launch.GPUS,
    ),
    Field(
        "gpu_model",
        pgettext_lazy("config generator", "GPU model"),
        "",
        gettext_lazy("For the cross-check of the weights against `--mem-fraction-static`."),
        kind="choice",
        choices=(("", gettext_lazy("not checked")), *gpu_catalog.choices()),
        group=launch.GPUS,
    ),
    Field(
        "mem_fraction_static",
        "`--mem-fraction-static`",
        "",
        gettext_lazy(
            "Share of each GPU for the weights and the KV cache pool, between 0 and 1. "
            "Blank: SGLang's own estimate at start-up."
        ),
        kind="float",
        group=launch.MEMORY,
    ),
    Field(
        "max_running_requests",
        "`--max-running-requests`",
        "",
        gettext_lazy("Requests decoded at once; the rest wait in the queue. Blank: SGLang's default."),
        kind="int",
        group=launch.MEMORY,
    ),
    Field(
        "context_length",
        "`--context-length`",
        "",
        gettext_lazy("Blank: the model's."),
        kind="int",
        group=launch.MEMORY,
    ),
    Field(
        "chunked_prefill_size",
        "`--chunked-prefill-size`",
        "",
        gettext_lazy(
            "Tokens of a long prompt prefilled per step; -1 turns chunking off. "
            "Blank: SGLang's default for the GPU's memory."
        ),
        kind="int",
        group=launch.MEMORY,
    ),
    Field(
        "kv_dtype",
        "`--kv-cache-dtype`",
        "auto",
        kind="choice",
        choices=_flag_choices("--kv-cache-dtype", ("auto", "fp8_e4m3", "fp8_e5m2")),
        group=launch.MEMORY,
    ),
    Field(
        "schedule_conservativeness",
        "`--schedule-conservativeness`",
        "",
        gettext_lazy(
            "Below 1 admits more requests (token usage stays low while requests queue); "
            "above 1 admits fewer (requests are retracted often). Blank: 1.0."
        ),
        kind="float",
        group=launch.SCHEDULING,
    ),
    Field(
        "disable_radix_cache",
        "`--disable-radix-cache`",
        "off",
        gettext_lazy("Turns prefix caching off; repeated prompts are prefilled again."),
        kind="bool",
        group=launch.SCHEDULING,
    ),
    Field("host", "`--host`", "0.0.0.0", group=launch.SERVER),
    Field("port", "`--port`", str(DEFAULT_PORT), kind="int", group=launch.SERVER),
    Field(
        "api_key_env",
        gettext_lazy("API key variable"),
        "SGLANG_API_KEY",
        gettext_lazy(
            "Passed as `--api-key` from this environment variable when the server starts; "
            "the key is never written into a file. Blank: no key."
        ),
        group=launch.SERVER,
    ),
    Field(
        "enable_metrics",
        "`--enable-metrics`",
        "on",
        gettext_lazy("Without it SGLang serves no `/metrics`: no probes, alerts or dashboard."),
        kind="bool",
        group=launch.SERVER,
    ),
    Field("log_requests", gettext_lazy("log each request"), "off", kind="bool", group=launch.SERVER),
    Field(
        "name",
        pgettext_lazy("config generator", "Name"),
        "sglang",
        gettext_lazy("Script, container and systemd name (a-z, 0-9, -)."),
        group=CONTAINER,
    ),
    Field(
        "image",
        pgettext_lazy("config generator", "Image"),
        DEFAULT_IMAGE,
        gettext_lazy(
            "Pin a release tag (lmsysorg/sglang:v0.5.x) for a deployment that does not change by itself."
        ),
        group=CONTAINER,
    ),
    Field(
        "model_cache",
        gettext_lazy("Model cache path"),
        "/models",
        gettext_lazy("Host path (docker, systemd) with the weights."),
        group=CONTAINER,
    ),
    *launch.shared_memory_fields(CONTAINER),
    Field("service_user", gettext_lazy("systemd user"), "sglang", group=SERVICE),
    Field("venv", gettext_lazy("Python venv"), "/opt/sglang/venv", group=SERVICE),
    Field(
        "startup_minutes",
        gettext_lazy("Start-up allowance (min)"),
        "15",
        gettext_lazy("Loading the weights and capturing CUDA graphs take minutes before the port opens."),
        kind="int",
        group=SERVICE,
    ),
)

SECTIONS = (
    Section(
        gettext_lazy("Model & engine"),
        ("model", "served_model_name", "dtype", "quantization", "trust_remote_code"),
    ),
    Section(launch.GPUS, ("tensor_parallel_size", "dp_size", "gpu_devices", "gpu_model")),
    Section(
        gettext_lazy("Memory & batching"),
        ("mem_fraction_static", "max_running_requests", "context_length", "chunked_prefill_size", "kv_dtype"),
    ),
    Section(launch.SERVER, ("port", "host", "api_key_env", "enable_metrics")),
    Section(CONTAINER, ("name", "image", "model_cache", "shm_size_gib", "docker_ipc"), advanced=True),
    Section(SERVICE, ("service_user", "venv", "startup_minutes"), advanced=True),
    Section(
        gettext_lazy("Engine flags"),
        ("schedule_conservativeness", "disable_radix_cache", "log_requests"),
        advanced=True,
    ),
)


@dataclass(frozen=True, kw_only=True)
class SglangSpec:
    model: str
    served_model_name: str
    dtype: str
    quantization: str
    trust_remote_code: bool
    tensor_parallel_size: int
    dp_size: int
    gpu_devices: tuple[int, ...]
    gpu_model: str
    mem_fraction_static: float | None
    max_running_requests: int | None
    context_length: int | None
    chunked_prefill_size: int | None
    kv_dtype: str
    schedule_conservativeness: float | None
    disable_radix_cache: bool
    host: str
    port: int
    api_key_env: str
    enable_metrics: bool
    log_requests: bool
    name: str
    image: str
    model_cache: str
    shm_size_gib: int
    docker_ipc: str
    service_user: str
    venv: str
    startup_minutes: int

    @property
    def gpu_count(self) -> int:
        return self.tensor_parallel_size * self.dp_size


def _optional_int(field: str, value: str, **limits: int) -> int | None:
    return safety.integer(field, value, **limits) if value.strip() else None


def _fraction(field: str, value: str) -> float | None:
    """`--mem-fraction-static`: a share of the GPU, strictly between 0 and 1."""
    if not value.strip():
        return None
    number = safety.number(field, value, minimum=0.0, maximum=1.0)
    if not 0 < number < 1:
        raise safety.UnsafeValue(
            f"{field}: " + _("%(value)s must be above 0 and below 1") % {"value": value.strip()}
        )
    return number


def _chunk(field: str, value: str) -> int | None:
    """`--chunked-prefill-size`: tokens per chunk, or -1 for no chunking."""
    if not value.strip():
        return None
    if value.strip() == "-1":
        return -1
    number = safety.integer(field, value, minimum=-1, maximum=10_000_000)
    if number < 1:
        raise safety.UnsafeValue(
            f"{field}: " + _("%(value)s: give -1 (no chunking) or a number of tokens") % {"value": number}
        )
    return number


def build(values: Mapping[str, str]) -> SglangSpec:
    tp = safety.integer("tensor_parallel_size", values["tensor_parallel_size"], minimum=1, maximum=64)
    dp = safety.integer("dp_size", values["dp_size"], minimum=1, maximum=64)
    devices = tuple(
        safety.integer("gpu_devices", d, maximum=63)
        for d in values["gpu_devices"].replace(" ", "").split(",")
        if d
    ) or tuple(range(tp * dp))
    if len(devices) != tp * dp:
        raise safety.UnsafeValue(
            "gpu_devices: "
            + _("%(count)s device(s) listed for TP %(tp)s × DP %(dp)s = %(gpus)s GPUs")
            % {"count": len(devices), "tp": tp, "dp": dp, "gpus": tp * dp}
        )
    api_key_env = values["api_key_env"].strip()
    conservativeness = values["schedule_conservativeness"]
    return SglangSpec(
        model=safety.token("model", values["model"]),
        served_model_name=safety.token("served_model_name", values["served_model_name"])
        if values["served_model_name"].strip()
        else "",
        dtype=values["dtype"],
        quantization=values["quantization"],
        trust_remote_code=flag(values["trust_remote_code"]),
        tensor_parallel_size=tp,
        dp_size=dp,
        gpu_devices=devices,
        gpu_model=values["gpu_model"],
        mem_fraction_static=_fraction("mem_fraction_static", values["mem_fraction_static"]),
        max_running_requests=_optional_int(
            "max_running_requests", values["max_running_requests"], minimum=1, maximum=100_000
        ),
        context_length=_optional_int(
            "context_length", values["context_length"], minimum=16, maximum=10_000_000
        ),
        chunked_prefill_size=_chunk("chunked_prefill_size", values["chunked_prefill_size"]),
        kv_dtype=values["kv_dtype"],
        schedule_conservativeness=safety.number(
            "schedule_conservativeness", conservativeness, minimum=0.01, maximum=100
        )
        if conservativeness.strip()
        else None,
        disable_radix_cache=flag(values["disable_radix_cache"]),
        host=safety.host("host", values["host"]),
        port=safety.port_number("port", values["port"]),
        api_key_env=safety.env_name("api_key_env", api_key_env) if api_key_env else "",
        enable_metrics=flag(values["enable_metrics"]),
        log_requests=flag(values["log_requests"]),
        name=safety.name("name", values["name"]),
        image=safety.token("image", values["image"].strip() or DEFAULT_IMAGE),
        model_cache=safety.path("model_cache", values["model_cache"]),
        shm_size_gib=safety.integer("shm_size_gib", values["shm_size_gib"], minimum=1, maximum=1024),
        docker_ipc=values["docker_ipc"],
        service_user=safety.name("service_user", values["service_user"]),
        venv=safety.path("venv", values["venv"]),
        startup_minutes=safety.integer("startup_minutes", values["startup_minutes"], minimum=1, maximum=120),
    )


# --- the command ------------------------------------------------------------------------------


def launch_args(spec: SglangSpec, *, host: str | None = None, key: str = "") -> list[tuple[str, str | None]]:
    """(flag, value or None for a switch) after `python -m sglang.launch_server`; only flags
    in the recorded server_args.py, and only where the spec differs from SGLang's default
    (the model, host and port are always written). `key` is how the API key is referenced
    (a shell or systemd variable), never the key itself."""
    args: list[tuple[str, str | None]] = [("--model-path", spec.model)]
    if spec.served_model_name:
        args.append(("--served-model-name", spec.served_model_name))
    args += [("--host", host or spec.host), ("--port", str(spec.port))]
    if spec.dtype != "auto":
        args.append(("--dtype", spec.dtype))
    if spec.quantization:
        args.append(("--quantization", spec.quantization))
    if spec.trust_remote_code:
        args.append(("--trust-remote-code", None))
    if spec.tensor_parallel_size > 1:
        args.append(("--tp-size", str(spec.tensor_parallel_size)))
    if spec.dp_size > 1:
        args.append(("--dp-size", str(spec.dp_size)))
    if spec.mem_fraction_static is not None:
        args.append(("--mem-fraction-static", f"{spec.mem_fraction_static:g}"))
    for name, value in (
        ("--max-running-requests", spec.max_running_requests),
        ("--context-length", spec.context_length),
        ("--chunked-prefill-size", spec.chunked_prefill_size),
    ):
        if value is not None:
            args.append((name, str(value)))
    if spec.kv_dtype != "auto":
        args.append(("--kv-cache-dtype", spec.kv_dtype))
    if spec.schedule_conservativeness is not None:
        args.append(("--schedule-conservativeness", f"{spec.schedule_conservativeness:g}"))
    if spec.disable_radix_cache:
        args.append(("--disable-radix-cache", None))
    if key:
        args.append(("--api-key", key))
    if spec.log_requests:
        args.append(("--log-requests", None))
    if spec.enable_metrics:
        args.append(("--enable-metrics", None))
    known = server_args()["flags"]
    unknown = [name for name, _value in args if name not in known]
    if unknown:  # a flag not recorded from server_args.py is a bug here, never a guess
        raise ValueError(f"not in {FLAGS_FILE.name}: {', '.join(unknown)}")
    return args


def command_lines(args: list[tuple[str, str | None]], program: tuple[str, ...] = PROGRAM) -> list[str]:
    """`program --flag value ...`, one flag per line. A value that refers to a variable
    ("$NAME" or "${NAME}") is double-quoted so the shell or systemd expands it as one word."""
    lines = [" ".join(shlex.quote(part) for part in program)]
    for name, value in args:
        if value is None:
            lines.append(name)
        elif value.startswith("$"):
            lines.append(f'{name} "{value}"')
        else:
            lines.append(f"{name} {shlex.quote(value)}")
    return lines


def _continued(lines: list[str], indent: str = "  ") -> str:
    return f" \\\n{indent}".join(lines)


def _key_guard(spec: SglangSpec) -> list[str]:
    if not spec.api_key_env:
        return ["# No API key: anyone who reaches the port can use the model."]
    return [
        "# SGLang takes the key only as --api-key: it is read from the environment here, so it is in",
        "# no file, but the process list (ps) of this host shows it.",
        f': "${{{spec.api_key_env}:?set {spec.api_key_env} to the API key}}"',
    ]


def _header(spec: SglangSpec, what: str) -> list[str]:
    source = server_args()["source"]
    return [
        "#!/usr/bin/env bash",
        f"# SGLang {what} for {spec.model}: generated by LLM Ops Console.",
        f"# Flags as defined in SGLang's server_args.py: {source}",
        "# GET /health_generate runs one token through the scheduler; /metrics needs --enable-metrics.",
    ]


def script(spec: SglangSpec) -> str:
    key = f"${spec.api_key_env}" if spec.api_key_env else ""
    lines = [
        *_header(spec, "server"),
        "set -euo pipefail",
        f"export CUDA_VISIBLE_DEVICES={','.join(str(d) for d in spec.gpu_devices)}",
        f"export HF_HOME={shlex.quote(spec.model_cache)}",
        *_key_guard(spec),
    ]
    body = _continued(command_lines(launch_args(spec, key=key)))
    return "\n".join(lines) + f"\nexec {body}\n"


def docker_script(spec: SglangSpec) -> str:
    devices = ",".join(str(d) for d in spec.gpu_devices)
    key = f"${spec.api_key_env}" if spec.api_key_env else ""
    options = [
        "docker run -d",
        f"--name {spec.name}",
        f"--gpus '\"device={devices}\"'",
        "--ipc=host" if spec.docker_ipc == "host" else f"--shm-size={spec.shm_size_gib}g",
        f"-p {spec.port}:{spec.port}",
        f"-v {shlex.quote(spec.model_cache)}:{shlex.quote(spec.model_cache)}",
        f"-e HF_HOME={shlex.quote(spec.model_cache)}",
        "--restart unless-stopped",
        spec.image,
    ]
    # Inside the container the server listens on every interface; -p decides who reaches it.
    serve = command_lines(launch_args(spec, host="0.0.0.0", key=key))
    lines = [*_header(spec, "in Docker"), "set -euo pipefail", *_key_guard(spec)]
    return "\n".join(lines) + "\n" + _continued([*options, *serve]) + "\n"


def unit(spec: SglangSpec) -> str:
    program = (f"{spec.venv}/bin/python", "-m", "sglang.launch_server")
    key = f"${{{spec.api_key_env}}}" if spec.api_key_env else ""
    exec_start = _continued(command_lines(launch_args(spec, key=key), program), indent="    ")
    devices = ",".join(str(d) for d in spec.gpu_devices)
    key_note = (
        f"# {spec.api_key_env}=... goes in this file (mode 0600); systemd passes it as --api-key."
        if spec.api_key_env
        else "# No API key: anyone who reaches the port can use the model."
    )
    return f"""[Unit]
Description=SGLang {spec.name} ({spec.model})
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User={spec.service_user}
Environment=CUDA_VISIBLE_DEVICES={devices}
Environment=HF_HOME={spec.model_cache}
{key_note}
EnvironmentFile=-/etc/sglang/{spec.name}.env
ExecStart={exec_start}
Restart=on-failure
RestartSec=30
# Loading the weights and capturing CUDA graphs take minutes before the port opens.
TimeoutStartSec={spec.startup_minutes * 60}
TimeoutStopSec=60
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
"""


def render(spec: SglangSpec) -> list[ConfigFile]:
    return [
        ConfigFile(f"{spec.name}-sglang.sh", script(spec), "bash"),
        ConfigFile(f"{spec.name}-sglang-docker.sh", docker_script(spec), "bash"),
        ConfigFile(f"sglang-{spec.name}.service", unit(spec), "ini"),
    ]


# --- cross-checks -----------------------------------------------------------------------------


def checks(spec: SglangSpec) -> list[Check]:
    found = [
        Check(
            "ok",
            _("Every flag written is one SGLang's `server_args.py` defines"),
            f"`{server_args()['source']}`",
        )
    ]
    found += _server_checks(spec) + _memory_checks(spec) + _model_checks(spec)
    return found


def _server_checks(spec: SglangSpec) -> list[Check]:
    found = []
    if not spec.enable_metrics:
        found.append(
            Check(
                "warning",
                _("Without `--enable-metrics` SGLang serves no `/metrics`"),
                _(
                    "The console's probes, the Prometheus alert rules and the Grafana dashboard read "
                    "the `sglang:` metrics."
                ),
                "--enable-metrics",
            )
        )
    if not spec.api_key_env:
        found.append(
            Check(
                "warning",
                _("No API key: anyone who reaches port %(port)s can use the model") % {"port": spec.port},
                fix=_("Set an API key variable, or keep the port reachable from the gateway only."),
            )
        )
    else:
        found.append(
            Check(
                "ok",
                _("The API key is passed from `%(variable)s` as `--api-key`")
                % {"variable": spec.api_key_env},
                _(
                    "SGLang reads the key from its command line only: it is in no file, but `ps` on "
                    "the host shows it."
                ),
            )
        )
    if spec.gpu_count > 1 and spec.docker_ipc != "host" and spec.shm_size_gib < 8:
        found.append(
            Check(
                "warning",
                _("/dev/shm of %(size)s GiB for %(gpus)s GPUs")
                % {"size": spec.shm_size_gib, "gpus": spec.gpu_count},
                _(
                    "Tensor-parallel workers exchange through shared memory; NCCL aborts when it "
                    "runs out (guide 2.5.3)."
                ),
                _("shm_size_gib 8 (or --ipc=host)"),
            )
        )
    if spec.dp_size > 1:
        found.append(
            Check(
                "ok",
                _("%(dp)s copies of the model on %(tp)s GPU(s) each: %(gpus)s GPUs")
                % {"dp": spec.dp_size, "tp": spec.tensor_parallel_size, "gpus": spec.gpu_count},
                _("Each data-parallel copy holds all the weights and its own KV cache pool."),
            )
        )
    return found


def _memory_checks(spec: SglangSpec) -> list[Check]:
    found = []
    fraction = spec.mem_fraction_static
    if fraction is not None and fraction > HIGH_FRACTION:
        found.append(
            Check(
                "warning",
                _("`--mem-fraction-static` %(value)s leaves little for activations and CUDA graphs")
                % {"value": f"{fraction:g}"},
                _(
                    "SGLang's tuning guide keeps 5-8 GB of each GPU outside the static pool; prefills and "
                    "the CUDA graph capture run out of memory without it."
                ),
                "0.85-0.9",
            )
        )
    if fraction is not None and fraction < LOW_FRACTION and not _sized(spec):
        found.append(
            Check(
                "warning",
                _("`--mem-fraction-static` %(value)s may leave no room for the KV cache")
                % {"value": f"{fraction:g}"},
                _(
                    "The static pool holds the weights and the KV cache; when the weights fill it "
                    "SGLang stops "
                    "with 'Not enough memory. Please try to increase --mem-fraction-static'."
                ),
                _("Give the GPU model to check it, or raise it"),
            )
        )
    if spec.chunked_prefill_size == -1:
        found.append(
            Check(
                "warning",
                _("Chunked prefill is off (`--chunked-prefill-size -1`)"),
                _(
                    "A long prompt is prefilled in one step: its activation peak can run the GPU out "
                    "of memory, "
                    "and the requests being decoded wait for it."
                ),
                "--chunked-prefill-size 4096",
            )
        )
    return found


def _entry(spec: SglangSpec):
    from diagnostics.sizing import catalog

    return catalog.find(spec.model, catalog.shipped())


def _sized(spec: SglangSpec) -> bool:
    return bool(spec.gpu_model) and _entry(spec) is not None


def _model_checks(spec: SglangSpec) -> list[Check]:
    """Attention heads, context length and the weights against the static pool, where the
    model is in the shipped sizing catalogue (and the GPU model is given, for the weights)."""
    from diagnostics.sizing.architecture import ConfigError
    from diagnostics.sizing.memory import weights_total

    entry = _entry(spec)
    if entry is None:
        if spec.gpu_model:
            return [
                Check(
                    "warning",
                    _("Not sized: %(model)s is not in the shipped sizing catalogue") % {"model": spec.model},
                )
            ]
        return []
    try:
        arch = entry.architecture()
    except (ConfigError, ValueError) as exc:
        return [Check("warning", _("Not sized: %(why)s") % {"why": exc})]
    found = []
    tp = spec.tensor_parallel_size
    if arch.num_attention_heads % tp:
        found.append(
            Check(
                "error",
                _("`--tp-size` %(tp)s does not divide the model's %(heads)s attention heads")
                % {"tp": tp, "heads": arch.num_attention_heads},
                _("Each tensor-parallel rank takes an equal share of the heads; SGLang stops at start-up."),
                _("a `--tp-size` that divides %(heads)s") % {"heads": arch.num_attention_heads},
            )
        )
    limit = arch.max_position_embeddings
    if spec.context_length and limit and spec.context_length > limit:
        found.append(
            Check(
                "warning",
                _("`--context-length` %(length)s is above the model's %(limit)s")
                % {"length": spec.context_length, "limit": limit},
                _(
                    "SGLang refuses it at start-up unless "
                    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 is set, "
                    "and the model may answer wrongly past what it was trained for."
                ),
                f"--context-length {limit}",
            )
        )
    if spec.gpu_model and spec.mem_fraction_static is not None:
        try:
            weights, _how = weights_total(arch, quantization=spec.quantization, dtype=spec.dtype)
        except ValueError as exc:
            return [*found, Check("warning", _("Not sized: %(why)s") % {"why": exc})]
        found.append(_weights_check(spec, weights / tp))
    return found


def _weights_check(spec: SglangSpec, weights_per_gpu: float) -> Check:
    gpu = gpu_catalog.get(spec.gpu_model)
    memory = gpu.memory_mib * 2**20
    fraction = spec.mem_fraction_static or 0.0
    pool = memory * fraction
    values = {
        "weights": f"{weights_per_gpu / 2**30:.1f}",
        "pool": f"{pool / 2**30:.1f}",
        "fraction": f"{fraction:g}",
        "memory": f"{memory / 2**30:.0f}",
        "kv": f"{(pool - weights_per_gpu) / 2**30:.1f}",
    }
    if weights_per_gpu >= pool:
        return Check(
            "error",
            _(
                "SGLang would stop at start-up: 'Not enough memory. Please try to increase "
                "--mem-fraction-static'"
            ),
            _(
                "The weights take %(weights)s GiB of each GPU; the static pool is %(pool)s GiB "
                "(`--mem-fraction-static` %(fraction)s of %(memory)s GiB), so nothing is left for "
                "the KV cache."
            )
            % values,
            _("raise `--mem-fraction-static`, quantize, or a larger `--tp-size`"),
        )
    return Check(
        "ok",
        _("About %(kv)s GiB of each GPU for the KV cache pool") % values,
        _(
            "%(pool)s GiB static pool (`--mem-fraction-static` %(fraction)s of %(memory)s GiB) minus "
            "%(weights)s GiB of weights."
        )
        % values,
    )


GENERATOR = Generator(
    key="sglang",
    label=gettext_noop("SGLang launch command"),
    description=gettext_noop(
        "`python -m sglang.launch_server` as a script, a `docker run` and a systemd unit, with the flags "
        "SGLang's `server_args.py` defines."
    ),
    fields=FIELDS,
    build=build,
    render=render,
    checks=checks,
    sections=SECTIONS,
)
