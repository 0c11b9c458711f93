"""A checkpoint's quantization, read from config.json's quantization_config, and the weight bytes
it implies when no safetensors index gives the exact size.

Formats read: fp8 (per-tensor or block-scaled: one fp32 scale per 128x128 block), awq, gptq
(int4/int8 with one fp16 scale and one packed zero point per group; gptq adds g_idx), mxfp4
(4-bit, one e8m0 scale per 32 values), bitsandbytes, fbgemm_fp8, compressed-tensors
(`config_groups` with per-group num_bits/type/strategy/group_size and `format`, the `ignore`
list) and modelopt (FP8, NVFP4: 4-bit plus one fp8 scale per 16 values, MIXED_PRECISION).
Sources: https://huggingface.co/docs/transformers/main/en/quantization/overview,
https://github.com/neuralmagic/compressed-tensors, https://github.com/NVIDIA/TensorRT-Model-Optimizer.

Quantized: the Linear weights the config targets, less those it leaves out (`ignore`,
`modules_to_not_convert`, `ignored_layers`, `exclude_modules`). At the dtype: embeddings, norms,
biases, router gates, the vision tower and the LM head unless the config quantizes it.

Every number and list is bounded (bits from a fixed set, group and block sizes, how many groups,
module names and patterns), so no quantization_config makes the estimate slow or overflow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from core.i18n import Message, later
from diagnostics.sizing import bounds
from diagnostics.sizing.config_error import ConfigError
from diagnostics.sizing.module_names import ModuleNames, check_patterns
from diagnostics.sizing.parameters import Tensor, tensors

MAX_GROUPS = 64  # compressed-tensors config_groups
MAX_NAMES = 100_000  # module names in one list (a config.json is at most 1 MB)


@dataclass(frozen=True, kw_only=True)
class Format:
    """How one set of Linear weights is stored."""

    bits: int
    scale_bytes: float = 2.0  # bytes of one scale
    group: int | None = None  # values sharing a scale along the input; None: per output channel
    block: tuple[int, int] | None = None  # 2-D blocks sharing one scale (FP8 block-scaled)
    per_tensor: bool = False  # one scale for the whole tensor
    zero_points: bool = False  # a packed zero point per group (asymmetric integers)
    g_idx: bool = False  # GPTQ's int32 group index per input column
    global_scale: bool = False  # NVFP4's fp32 second-level scale per tensor
    floating: bool = False  # float values (fp8, fp4), not integers (compressed-tensors' type)

    def tensor_bytes(self, t: Tensor) -> float:
        rows, cols = t.rows, t.cols
        total = rows * cols * self.bits / 8
        if self.block:
            total += math.ceil(rows / self.block[0]) * math.ceil(cols / self.block[1]) * self.scale_bytes
        elif self.group:
            groups = rows * math.ceil(cols / self.group)
            total += groups * self.scale_bytes + (groups * self.bits / 8 if self.zero_points else 0)
        elif self.per_tensor:
            total += self.scale_bytes
        else:
            total += rows * self.scale_bytes
        total += (cols * 4 if self.g_idx else 0) + (4 if self.global_scale else 0)
        return total * t.count


@dataclass(frozen=True, kw_only=True)
class Rule:
    """The Linear layers one format applies to: all of them, or those a target names."""

    format: Format
    targets: tuple[str, ...] = ("Linear",)

    @cached_property
    def named(self) -> ModuleNames:
        """The targets that name modules (all but "Linear")."""
        return ModuleNames.of(t for t in self.targets if t != "Linear")


@dataclass(frozen=True, kw_only=True)
class Scheme:
    method: str  # quant_method as the config writes it
    key: str  # the calculator's name for it (memory._BYTES_PER_PARAM)
    detail: str  # what the config says, in a line
    rules: tuple[Rule, ...]
    ignored: tuple[str, ...] = ()
    lm_head_quantized: bool = False  # whether an untargeted-by-name LM head follows the rules

    @cached_property
    def ignored_names(self) -> ModuleNames:
        return ModuleNames.of(self.ignored)


def _error(field_name: str, value: Any, expected: Message) -> ConfigError:
    return ConfigError(
        later(
            "config.json quantization_config %(field)s is %(value)s; %(expected)s",
            field=repr(field_name),
            value=bounds.shown(value),
            expected=expected,
        )
    )


def _int_field(
    q: Mapping[str, Any], name: str, *, allowed: Sequence[int] = (), default: int | None = None
) -> int:
    value = q.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _error(name, value, later("it must be a whole number"))
    if allowed and value not in allowed:
        raise _error(name, value, later("expected one of %(choices)s", choices=", ".join(map(str, allowed))))
    return value


def _group(q: Mapping[str, Any], name: str = "group_size") -> int | None:
    value = _int_field(q, name, default=128)
    if value == -1:
        return None  # one scale per output channel
    if not 1 <= value <= bounds.MAX_GROUP:
        raise _error(name, value, _group_expected())
    return value


def _group_expected() -> Message:
    return later("expected a group size from 1 to %(high)s, or -1", high=f"{bounds.MAX_GROUP:,}")


def _block(value: Any) -> tuple[int, int] | None:
    """[rows, cols] of a block-scaled format, each a size from 1 to bounds.MAX_GROUP."""
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(bounds.in_range(b, 1, bounds.MAX_GROUP) for b in value)
    ):
        return value[0], value[1]
    return None


def _names(q: Mapping[str, Any], *keys: str) -> tuple[str, ...]:
    found: list[str] = []
    for key in keys:
        value = q.get(key)
        if value is None:
            continue
        found += _name_list(key, value)
    return tuple(found)


def _name_list(key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _error(key, value, later("it must be a list of module names"))
    if len(value) > MAX_NAMES:
        raise _error(key, f"[{len(value):,} names]", _at_most(MAX_NAMES))
    return value


def _at_most(limit: int) -> Message:
    return later("expected at most %(limit)s", limit=f"{limit:,}")


_UNQUANTIZED_KEYS = ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules")


def _fp8(q: Mapping[str, Any]) -> Scheme:
    if "bits" in q and q["bits"] != 8:
        raise _error("bits", q["bits"], later("quant_method 'fp8' stores 8-bit weights"))
    given = q.get("weight_block_size")
    if given is not None:
        block = _block(given)
        if block is None:
            raise _error(
                "weight_block_size", given, later("expected two positive whole numbers, e.g. [128, 128]")
            )
        fmt = Format(bits=8, scale_bytes=4, block=block)
        detail = f"fp8 e4m3, one fp32 scale per {block[0]}x{block[1]} block"
    else:
        fmt, detail = Format(bits=8, scale_bytes=4, per_tensor=True), "fp8 e4m3, per-tensor scales"
    return Scheme(
        method="fp8",
        key="fp8",
        detail=detail,
        rules=(Rule(format=fmt),),
        ignored=_names(q, *_UNQUANTIZED_KEYS),
    )


def _int_method(method: str, q: Mapping[str, Any]) -> Scheme:
    bits = _int_field(q, "bits", allowed=(2, 3, 4, 8), default=_int_field(q, "w_bit", default=4))
    group = _group(q, "group_size" if "group_size" in q else "q_group_size")
    gptq = method == "gptq"
    zero = bool(q.get("zero_point", True)) if not gptq else True  # GPTQ stores qzeros even when symmetric
    fmt = Format(bits=bits, group=group, zero_points=zero, g_idx=gptq)
    key = method if bits == 4 else "int8" if bits == 8 else method
    detail = f"{method} int{bits}, group size {group or 'per channel'}"
    return Scheme(
        method=method,
        key=key,
        detail=detail,
        rules=(Rule(format=fmt),),
        ignored=_names(q, *_UNQUANTIZED_KEYS),
        lm_head_quantized=bool(q.get("lm_head", False)),
    )


def _simple(method: str, q: Mapping[str, Any]) -> Scheme:
    if method == "mxfp4":
        fmt, key, detail = (
            Format(bits=4, scale_bytes=1, group=32),
            "mxfp4",
            "mxfp4, one e8m0 scale per 32 values",
        )
    elif method == "fbgemm_fp8":
        fmt, key, detail = Format(bits=8, scale_bytes=4), "fp8", "fbgemm fp8, one scale per output channel"
    else:  # bitsandbytes
        eight = bool(q.get("load_in_8bit"))
        fmt = Format(bits=8, scale_bytes=4) if eight else Format(bits=4, scale_bytes=4, group=64)
        key, detail = (
            ("int8", "bitsandbytes int8") if eight else ("bitsandbytes", "bitsandbytes 4-bit, blocks of 64")
        )
    ignored = _names(q, *_UNQUANTIZED_KEYS, "llm_int8_skip_modules")
    return Scheme(method=method, key=key, detail=detail, rules=(Rule(format=fmt),), ignored=ignored)


_FORMATS = {
    "nvfp4-pack-quantized": ("float", 4),
    "mxfp4-pack-quantized": ("float", 4),
    "float-quantized": ("float", 8),
    "pack-quantized": ("int", None),
    "int-quantized": ("int", 8),
    "naive-quantized": (None, None),
    "mixed-precision": (None, None),
}


def _ct_format(weights: Mapping[str, Any], name: str) -> Format:
    bits = _int_field(weights, "num_bits", allowed=(2, 3, 4, 8, 16))
    kind = weights.get("type", "int")
    if kind not in ("int", "float"):
        raise _error(f"config_groups.{name}.weights.type", kind, later("expected 'int' or 'float'"))
    strategy = str(weights.get("strategy") or ("group" if weights.get("group_size") else "channel"))
    group = weights.get("group_size")
    if strategy in ("group", "tensor_group") and not bounds.in_range(group, 1, bounds.MAX_GROUP):
        raise _error(
            f"config_groups.{name}.weights.group_size",
            group,
            later("strategy %(strategy)s needs a group size", strategy=bounds.shown(strategy)),
        )
    block = _block(weights.get("block_structure"))
    if strategy == "block" and block is None:
        raise _error(
            f"config_groups.{name}.weights.block_structure",
            weights.get("block_structure"),
            later("strategy 'block' needs [rows, cols]"),
        )
    fp4 = kind == "float" and bits == 4
    return Format(
        bits=bits,
        scale_bytes=1 if fp4 else 4 if strategy == "block" else 2,
        group=group if strategy in ("group", "tensor_group") else None,
        block=block if strategy == "block" else None,
        per_tensor=strategy == "tensor",
        zero_points=kind == "int" and weights.get("symmetric") is False,
        global_scale=strategy == "tensor_group",
        floating=kind == "float",
    )


def _compressed_tensors(q: Mapping[str, Any]) -> Scheme:
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise _error(
            "config_groups", groups, later("compressed-tensors needs at least one group with 'weights'")
        )
    if len(groups) > MAX_GROUPS:
        raise _error("config_groups", f"{{{len(groups)} groups}}", _at_most(MAX_GROUPS))
    declared = q.get("format")
    if declared is not None and declared not in _FORMATS:
        raise _error(
            "format", declared, later("expected one of %(choices)s", choices=", ".join(sorted(_FORMATS)))
        )
    rules: list[Rule] = []
    for name, group in groups.items():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            raise _error(
                f"config_groups.{name}.weights", weights, later("each group needs a 'weights' object")
            )
        fmt = _ct_format(weights, name)
        kind, bits = _FORMATS.get(str(group.get("format") or declared), (None, None))
        if (kind and weights.get("type", "int") != kind) or (bits and fmt.bits != bits):
            raise _error(
                "format",
                group.get("format") or declared,
                later(
                    "group %(group)s stores %(kind)s %(bits)s-bit weights",
                    group=repr(name),
                    kind=weights.get("type"),
                    bits=fmt.bits,
                ),
            )
        targets = _name_list(f"config_groups.{name}.targets", group.get("targets") or ["Linear"])
        rules.append(Rule(format=fmt, targets=tuple(targets)))
    narrowest = min(rules, key=lambda r: r.format.bits).format
    key = _key_for(narrowest)
    detail = "compressed-tensors " + ", ".join(sorted({_describe(r.format) for r in rules}))
    return Scheme(
        method="compressed-tensors", key=key, detail=detail, rules=tuple(rules), ignored=_names(q, "ignore")
    )


def _key_for(fmt: Format) -> str:
    if fmt.bits == 8:
        return "fp8" if fmt.floating else "int8"
    if fmt.bits == 4 and fmt.scale_bytes == 1:
        return "nvfp4" if fmt.group == 16 else "mxfp4"
    return "int4"


def _describe(fmt: Format) -> str:
    if fmt.bits == 4 and fmt.scale_bytes == 1:
        return f"fp4 with one fp8 scale per {fmt.group} values"
    grain = (
        f"{fmt.block[0]}x{fmt.block[1]} blocks"
        if fmt.block
        else f"group {fmt.group}"
        if fmt.group
        else "per tensor"
        if fmt.per_tensor
        else "per channel"
    )
    return f"{fmt.bits}-bit ({grain})"


_NVFP4 = Format(bits=4, scale_bytes=1, group=16, global_scale=True)
_MODELOPT_ALGOS = {
    "FP8": Format(bits=8, scale_bytes=4, per_tensor=True),
    "FP8_PB_WO": Format(bits=8, scale_bytes=4, block=(128, 128)),
    "NVFP4": _NVFP4,
    "W4A16_NVFP4": _NVFP4,
    "W4A8_NVFP4_FP8": _NVFP4,
}


def _modelopt(q: Mapping[str, Any]) -> Scheme:
    """ModelOpt's hf_quant_config ("quantization": {...}) or the same folded into config.json."""
    inner = q.get("quantization") if isinstance(q.get("quantization"), Mapping) else q
    algo = str(inner.get("quant_algo") or "")
    ignored = _names(inner, *_UNQUANTIZED_KEYS)
    if algo == "MIXED_PRECISION":
        layers = inner.get("quantized_layers")
        if not isinstance(layers, Mapping) or not layers:
            raise _error(
                "quantized_layers", layers, later("quant_algo 'MIXED_PRECISION' lists its layers there")
            )
        if len(layers) > MAX_NAMES:
            raise _error("quantized_layers", f"{{{len(layers):,} layers}}", _at_most(MAX_NAMES))
        by_algo: dict[str, list[str]] = {}
        for layer, spec in layers.items():
            by_algo.setdefault(str(spec.get("quant_algo") if isinstance(spec, Mapping) else spec), []).append(
                layer
            )
        rules = tuple(Rule(format=_modelopt_format(a), targets=tuple(names)) for a, names in by_algo.items())
        key = "nvfp4" if any("NVFP4" in a for a in by_algo) else "fp8"
        return Scheme(
            method="modelopt",
            key=key,
            detail="modelopt mixed " + "/".join(sorted(by_algo)),
            rules=rules,
            ignored=ignored,
        )
    fmt = _modelopt_format(algo)
    if fmt is _NVFP4 and inner.get("group_size", 16) != 16:
        raise _error("group_size", inner.get("group_size"), later("NVFP4 scales every 16 values"))
    key = "nvfp4" if fmt is _NVFP4 else "fp8"
    return Scheme(
        method="modelopt",
        key=key,
        detail=f"modelopt {algo}",
        rules=(Rule(format=fmt),),
        ignored=ignored,
        lm_head_quantized=True,
    )


def _modelopt_format(algo: str) -> Format:
    if algo not in _MODELOPT_ALGOS:
        raise _error(
            "quant_algo",
            algo,
            later(
                "expected one of %(choices)s or MIXED_PRECISION", choices=", ".join(sorted(_MODELOPT_ALGOS))
            ),
        )
    return _MODELOPT_ALGOS[algo]


def scheme(config: Mapping[str, Any]) -> Scheme | None:
    """The checkpoint's quantization from config.json, None when it has none; ConfigError naming
    the field when the config is unknown, implausible or contradicts itself."""
    found = _scheme(config)
    if found is not None:  # its module lists, read once here, and bounded
        check_patterns([found.ignored_names, *(rule.named for rule in found.rules)])
    return found


def _scheme(config: Mapping[str, Any]) -> Scheme | None:
    q = config.get("quantization_config")
    if q is None and isinstance(config.get("text_config"), Mapping):
        q = config["text_config"].get("quantization_config")
    if not q:
        return None
    if not isinstance(q, Mapping):
        raise ConfigError(later("config.json 'quantization_config' must be an object"))
    method = str(q.get("quant_method") or ("modelopt" if q.get("quant_algo") else "")).lower()
    if method == "fp8":
        return _fp8(q)
    if method in ("awq", "gptq"):
        return _int_method(method, q)
    if method in ("mxfp4", "fbgemm_fp8", "bitsandbytes"):
        return _simple(method, q)
    if method == "compressed-tensors":
        return _compressed_tensors(q)
    if method in ("modelopt", "modelopt_fp4"):
        return _modelopt(q)
    raise _error(
        "quant_method", q.get("quant_method"),
        later("expected one of %(choices)s",
              choices="awq, bitsandbytes, compressed-tensors, fbgemm_fp8, fp8, gptq, modelopt, mxfp4"),
    )  # fmt: skip


def _format_of(t: Tensor, s: Scheme) -> Format | None:
    if not t.linear or s.ignored_names.match(t.name):
        return None
    for rule in s.rules:
        if rule.named.match(t.name):
            return rule.format
        if "Linear" in rule.targets and (
            t.name != "lm_head" or s.lm_head_quantized or s.method == "compressed-tensors"
        ):
            return rule.format
    return None


@dataclass(frozen=True, kw_only=True)
class Estimate:
    total: int  # bytes
    quantized_elements: int
    unquantized_elements: int


def estimate(config: Mapping[str, Any], *, dtype_bytes: float = 2.0) -> Estimate:
    """The checkpoint's weight bytes: quantized Linear weights at their bits plus scales and zero
    points, everything else at the dtype."""
    s = scheme(config)
    total, quantized, plain = 0.0, 0, 0
    for t in tensors(config):
        fmt = _format_of(t, s) if s else None
        if fmt is None:
            total += t.elements * dtype_bytes
            plain += t.elements
        else:
            total += fmt.tensor_bytes(t)
            quantized += t.elements
    return Estimate(total=round(total), quantized_elements=quantized, unquantized_elements=plain)
