"""The flags an engine really runs with, read from its command line, and where they drift from
the inventory (guide 2.5.5: `ps aux | grep vllm | sed 's/.*python/python/'`).

vLLM parses its flags with argparse (FlexibleArgumentParser): `--flag value`, `--flag=value`,
`--flag_name` spelled with underscores, `--x` / `--no-x` for booleans, a few short aliases, and
`vllm serve MODEL` with the model as the first positional argument. The parse here follows the
same rules without vLLM's table of flags: an unknown flag takes the next word as its value unless
that word is another flag, so the booleans that usually stand before a positional are listed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

from core.i18n import Message, later

REDACTED = "<redacted>"

# vLLM's short aliases (vllm/engine/arg_utils.py, vllm/entrypoints/openai/cli_args.py).
VLLM_ALIASES = {
    "-tp": "tensor-parallel-size",
    "-pp": "pipeline-parallel-size",
    "-dp": "data-parallel-size",
    "-dcp": "decode-context-parallel-size",
    "-dpn": "data-parallel-rank",
    "-dpr": "data-parallel-start-rank",
    "-dpl": "data-parallel-size-local",
    "-dpa": "data-parallel-address",
    "-dpp": "data-parallel-rpc-port",
    "-dpb": "data-parallel-backend",
    "-ep": "enable-expert-parallel",
    "-asc": "api-server-count",
    "-q": "quantization",
    "-O": "compilation-config",
}

# Flags that take no value, so the word after them is not theirs.
BOOLEAN_FLAGS = frozenset(
    {
        "async-scheduling",
        "disable-custom-all-reduce",
        "disable-custom-kernels",
        "disable-frontend-multiprocessing",
        "disable-log-requests",
        "disable-log-stats",
        "disable-sliding-window",
        "enable-auto-tool-choice",
        "enable-chunked-prefill",
        "enable-expert-parallel",
        "enable-log-requests",
        "enable-lora",
        "enable-prefix-caching",
        "enable-sleep-mode",
        "enforce-eager",
        "headless",
        "json-output",
        "skip-tokenizer-init",
        "trust-remote-code",
    }
)

# Flags that take every following word (argparse nargs="+").
MULTI_VALUE_FLAGS = frozenset({"served-model-name", "api-key", "cudagraph-capture-sizes", "cuda-graph-sizes"})

# Where an engine other than vLLM names its model.
_MODEL_FLAGS = {"tgi": "model-id", "sglang": "model-path"}

_SECRET_FLAG_RE = re.compile(r"^(?:.*-)?(?:key|token|secret|password|passwd|credentials?)$")
# Bounded repeats: an argument may be a megabyte long.
_URL_PASSWORD_RE = re.compile(
    r"(?P<scheme>\b[a-z][a-z0-9+.-]{0,31}://)(?P<user>[^/:@\s]{0,256}):[^/@\s]{1,1024}@", re.I
)
_PYTHON_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs"})
_PYTHON_RE = re.compile(r"^python(?:\d+(?:\.\d+)*)?$")
_NUMBER_RE = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")


@dataclass(frozen=True)
class EngineCommand:
    engine: str
    args: tuple[str, ...]  # what follows the program (and `serve`, or `-m module`)


def recognise(argv: Sequence[str]) -> EngineCommand | None:
    """Which engine a command line starts, None for any other program."""
    if not argv:
        return None
    if argv[0].startswith("VLLM::"):  # a helper's setproctitle title: VLLM::EngineCore
        return EngineCommand("vllm", ())
    program = PurePosixPath(argv[0]).name
    if _PYTHON_RE.match(program):
        return _python_command(argv)
    return _program_command(program, tuple(argv[1:]))


def _python_command(argv: Sequence[str]) -> EngineCommand | None:
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "-m" and i + 1 < len(argv):
            return _module_command(argv[i + 1], tuple(argv[i + 2 :]))
        if word == "-c":  # inline code: a multiprocessing helper, not a server
            return None
        if not word.startswith("-"):  # a script: /usr/local/bin/vllm serve ... (a shebang)
            return _program_command(PurePosixPath(word).name, tuple(argv[i + 1 :]))
        i += 2 if word in _PYTHON_OPTIONS_WITH_VALUE else 1
    return None


def _module_command(module: str, rest: tuple[str, ...]) -> EngineCommand | None:
    if module in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"):
        return EngineCommand("vllm", rest)
    if module == "vllm.entrypoints.cli.main" and rest[:1] == ("serve",):
        return EngineCommand("vllm", rest[1:])
    if module == "sglang.launch_server":
        return EngineCommand("sglang", rest)
    if module == "text_generation_server.cli":
        return EngineCommand("tgi", rest)
    return None


def _program_command(program: str, rest: tuple[str, ...]) -> EngineCommand | None:
    if program == "vllm" and rest[:1] == ("serve",):
        return EngineCommand("vllm", rest[1:])
    if program in ("text-generation-launcher", "text-generation-router", "text-generation-server"):
        return EngineCommand("tgi", rest)
    if program == "ollama" and rest[:1] in (("serve",), ("runner",)):
        return EngineCommand("ollama", rest[1:])
    if program.startswith("ollama_llama_server"):
        return EngineCommand("ollama", rest)
    return None


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """The command line with the values of secret flags (--api-key, --hf-token, …) and the
    passwords in URLs replaced by <redacted>."""
    out: list[str] = []
    owed = 0  # words still to hide: --api-key takes several (nargs="+"), --hf-token one
    for word in argv:
        if owed and not _looks_like_flag(word):
            out.append(REDACTED)
            owed -= 1
            continue
        owed = 0
        name, eq, _ = word[2:].partition("=")
        name = name.replace("_", "-")
        if word.startswith("--") and _SECRET_FLAG_RE.match(name):
            out.append(f"--{name}={REDACTED}" if eq else word)
            owed = 0 if eq else (len(argv) if name in MULTI_VALUE_FLAGS else 1)
            continue
        out.append(_URL_PASSWORD_RE.sub(rf"\g<scheme>\g<user>:{REDACTED}@", word) if "://" in word else word)
    return tuple(out)


def parse_launch_flags(argv: Sequence[str]) -> dict[str, Any]:
    """Flags by long name without dashes: {"max-model-len": "16384", "enable-prefix-caching":
    True, "model": "/models/x"}; values as typed, booleans as True/False, several words as a list.
    Words no flag takes are under "positional" (vLLM's first one is the model)."""
    command = recognise(argv)
    args = command.args if command else tuple(argv[1:])
    flags, positional = _parse_args(args)
    engine = command.engine if command else ""
    if engine == "vllm" and positional:
        flags["model"] = positional.pop(0)  # `vllm serve MODEL` wins over --model
    elif engine in _MODEL_FLAGS and _MODEL_FLAGS[engine] in flags:
        flags["model"] = flags[_MODEL_FLAGS[engine]]
    if positional:
        flags["positional"] = positional
    return flags


def _parse_args(args: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    flags: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            positional.extend(args[i + 1 :])
            break
        if not _looks_like_flag(word):
            positional.append(word)
            i += 1
            continue
        name, value = _flag_name(word)
        if value is not None:
            flags[name] = value
            i += 1
        elif name.startswith("no-") and len(name) > 3:
            flags[name[3:]] = False
            i += 1
        elif name in MULTI_VALUE_FLAGS:
            values, i = _take_values(args, i + 1)
            flags[name] = values[0] if len(values) == 1 else (values or True)
        elif name not in BOOLEAN_FLAGS and i + 1 < len(args) and not _looks_like_flag(args[i + 1]):
            flags[name] = args[i + 1]
            i += 2
        else:
            flags[name] = True
            i += 1
    return flags, positional


def _flag_name(word: str) -> tuple[str, str | None]:
    """(long name, value given with "=" or glued as in -O3, else None)."""
    if word.startswith("--"):
        name, eq, value = word[2:].partition("=")
        return name.replace("_", "-"), value if eq else None
    short, eq, value = word.partition("=")
    if short in VLLM_ALIASES:
        return VLLM_ALIASES[short], value if eq else None
    if short.startswith("-O") and len(short) > 2:  # -O3: argparse's glued value
        return VLLM_ALIASES["-O"], word[2:]
    return short.lstrip("-"), value if eq else None


def _take_values(args: Sequence[str], start: int) -> tuple[list[str], int]:
    end = start
    while end < len(args) and not _looks_like_flag(args[end]):
        end += 1
    return list(args[start:end]), end


def _looks_like_flag(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not _NUMBER_RE.match(word)


# -- drift against the inventory -----------------------------------------------------------------

# Inventory field → (vLLM flag, how values compare).
FIELDS: dict[str, tuple[str, str]] = {
    "served_model_name": ("served-model-name", "name"),
    "max_model_len": ("max-model-len", "int"),
    "gpu_memory_utilization": ("gpu-memory-utilization", "float"),
    "max_num_seqs": ("max-num-seqs", "int"),
    "max_num_batched_tokens": ("max-num-batched-tokens", "int"),
    "tensor_parallel_size": ("tensor-parallel-size", "int"),
    "pipeline_parallel_size": ("pipeline-parallel-size", "int"),
    "dtype": ("dtype", "dtype"),
    "quantization": ("quantization", "text"),
    "kv_cache_dtype": ("kv-cache-dtype", "text"),
    "enable_prefix_caching": ("enable-prefix-caching", "bool"),
    "port": ("port", "int"),
}

# What vLLM runs with when a flag is left out (arg_utils.py, config/cache.py, cli_args.py).
# None: the value depends on the model or the GPU, so a left-out flag is "not set", never a drift.
# served-model-name defaults to the model itself (handled in _running_value).
VLLM_DEFAULTS: dict[str, object] = {
    "max-model-len": None,  # from the model's config.json
    "gpu-memory-utilization": 0.9,
    "max-num-seqs": None,  # 256, or 1024 on >= 70 GiB GPUs other than A100 (get_batch_defaults)
    "max-num-batched-tokens": None,  # 2048, or 8192 on the same GPUs
    "tensor-parallel-size": 1,
    "pipeline-parallel-size": 1,
    "dtype": "auto",
    "quantization": None,  # from the checkpoint's quantization_config
    "kv-cache-dtype": "auto",
    "enable-prefix-caching": True,  # V1 engine (0.8 and later); V0 left it off
    "port": 8000,
}

_DTYPE_ALIASES = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16"}
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_HUMAN_INT_RE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g|t|Ki|Mi|Gi|Ti|K|M|G|T)?$")


@dataclass(frozen=True)
class FlagDrift:
    flag: str
    inventory: object
    running: object
    running_is_default: bool = False  # the flag is left out; `running` is vLLM's default

    @property
    def message(self) -> Message:
        inventory, running = _shown(self.inventory), _shown(self.running)
        if self.inventory is None:
            return later(
                "inventory leaves --%(flag)s at vLLM's default, the process runs %(running)s",
                flag=self.flag,
                running=running,
            )
        if self.running_is_default:
            return later(
                "inventory says --%(flag)s %(inventory)s, the process runs vLLM's default %(running)s",
                flag=self.flag,
                inventory=inventory,
                running=running,
            )
        return later(
            "inventory says --%(flag)s %(inventory)s, the process runs %(running)s",
            flag=self.flag,
            inventory=inventory,
            running=running,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"message": self.message.to_json()}


def drift(*, inventory: Mapping[str, object], running: Mapping[str, object]) -> list[FlagDrift]:
    """Where the flags a vLLM process runs with (parse_launch_flags) differ from the inventory's
    instance fields. A left-out flag counts as vLLM's default; where that default depends on the
    model, or the flags come from a --config file, a left-out flag is not compared."""
    drifts = []
    for key, (flag, kind) in FIELDS.items():
        if key not in inventory:
            continue
        wanted = _inventory_value(inventory[key])
        value, is_default = _running_value(flag, running)
        if value is None or (wanted is None and is_default):
            continue
        if wanted is None or not _same(kind, wanted, value):
            drifts.append(FlagDrift(flag, wanted, value, running_is_default=is_default))
    return drifts


def _inventory_value(value: object) -> object:
    return None if value == "" else value


def _running_value(flag: str, running: Mapping[str, object]) -> tuple[object, bool]:
    if flag in running:
        return running[flag], False
    if "config" in running:  # the YAML file may set it; it is not read here
        return None, True
    if flag == "served-model-name":
        return running.get("model"), True
    return VLLM_DEFAULTS.get(flag), True


def _same(kind: str, wanted: object, value: object) -> bool:
    if kind == "name":
        names = value if isinstance(value, list) else [value]
        return str(wanted) in [str(name) for name in names]
    if kind == "bool":
        return _as_bool(wanted) == _as_bool(value)
    if kind in ("int", "float"):
        a, b = _as_number(wanted), _as_number(value)
        if a is not None and b is not None:
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if kind == "dtype":
        return _dtype(wanted) == _dtype(value)
    return str(wanted).strip().lower() == str(value).strip().lower()


def _as_bool(value: object) -> object:
    if isinstance(value, str):
        return {"true": True, "1": True, "on": True, "false": False, "0": False, "off": False}.get(
            value.strip().lower(), value
        )
    return value


def _as_number(value: object) -> float | None:
    """A number as vLLM reads it; "16k" is 16,000 and "16K" 16,384 (human_readable_int)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        number = float(str(value))
        return number if math.isfinite(number) else None
    except ValueError:
        pass
    match = _HUMAN_INT_RE.match(str(value).strip())
    if match is None:
        return None
    number, suffix = float(match[1]), match[2]
    return number * (_DECIMAL.get(suffix) or _BINARY[suffix] if suffix else 1)


def _dtype(value: object) -> str:
    text = str(value).strip().lower()
    return _DTYPE_ALIASES.get(text, text)


def _shown(value: object) -> object:
    if isinstance(value, bool):
        return later("on") if value else later("off")
    if isinstance(value, list):
        return " ".join(str(item) for item in value)
    return value
