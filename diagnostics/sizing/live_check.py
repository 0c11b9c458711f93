"""The live sizing check: the calculator's prediction for an instance's inventory flags and
GPUs against what its running engine reports in `vllm:cache_config_info` (num_gpu_blocks,
block_size, gpu_memory_utilization), the difference in blocks, tokens and per cent, and
which explanation fits when they drift apart.

Pure: `compare(sizing, reported)` takes the scheduled check's Sizing (calculator.compute or
size) and the reported values; the capacity service (diagnostics/capacity_service.py) reads
them from the probes and keeps the finding. docs/live-sizing-check.md explains the causes
and the tolerance.

The engine's figures are per GPU (one tensor-parallel rank), like the calculator's. Its
concurrency is derived the way vLLM logs "Maximum concurrency for N tokens per request: X":
num_gpu_blocks / the blocks one max_model_len request takes (num_gpu_blocks x block_size /
max_model_len for a model of full-attention layers only).

Tolerance (TOLERANCE_SHARE, TOLERANCE_BYTES): the calculator's measured accuracy. Sized from
their flags alone, the 37 real start-ups of diagnostics/sizing/data/scratch_checks.json
(`make eval`) land within 25.2 % of the logged KV cache memory (median 2.0 %); every error
above 11 % is on a cache under 12 GiB and at most 1.35 GiB, and the largest absolute error
(3.09 GiB) is 11.0 % of a 28 GiB cache. A drift is a residual beyond the larger of 15 % of the
expected cache and 2 GiB per GPU: every scratch case is inside it (the nearest at 82 % of it;
tests/diagnostics/test_live_sizing_check.py keeps it so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from math import ceil
from typing import Any

from core.i18n import Message, later
from diagnostics.sizing import kv_cache
from diagnostics.sizing.calculator import Sizing, SpecError, compute
from diagnostics.sizing.capacity import Issue
from diagnostics.sizing.figures import GiB

TOLERANCE_SHARE = 0.15  # of the expected KV cache (blocks)
TOLERANCE_BYTES = 2 * GiB  # per GPU: the floor where the cache is small
UTILIZATION_EPSILON = 0.0005  # the label is str(float): "0.9" is 0.9
CODE = "live_sizing_drift"
REPORTED_NAMES = ("num_gpu_blocks", "block_size", "gpu_memory_utilization")


class Cause(StrEnum):
    """Why the engine's cache differs from the prediction (several may hold at once)."""

    UTILIZATION = "utilization_differs"
    BLOCK_SIZE = "block_size_differs"
    FEWER_BLOCKS = "fewer_blocks"
    MORE_BLOCKS = "more_blocks"


@dataclass(frozen=True, kw_only=True)
class Reported:
    """What the running engine reports (vllm:cache_config_info's labels)."""

    num_gpu_blocks: int
    block_size: int | None = None
    gpu_memory_utilization: float | None = None

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Reported | None:
        """From canonical values (num_gpu_blocks, block_size, gpu_memory_utilization); None
        without a positive block count (not scraped, or the engine is not vLLM)."""
        blocks = _number(values.get("num_gpu_blocks"))
        if blocks is None or blocks < 1:
            return None
        block_size = _number(values.get("block_size"))
        utilization = _number(values.get("gpu_memory_utilization"))
        return cls(
            num_gpu_blocks=int(blocks),
            block_size=int(block_size) if block_size and block_size >= 1 else None,
            gpu_memory_utilization=utilization if utilization and 0 < utilization <= 1 else None,
        )


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN is no reading


@dataclass(frozen=True, kw_only=True)
class Side:
    """One column of the comparison: the prediction or the engine's report."""

    blocks: int
    block_size: int
    tokens: int
    max_concurrency: float
    gpu_memory_utilization: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "blocks": self.blocks,
            "block_size": self.block_size,
            "tokens": self.tokens,
            "max_concurrency": round(self.max_concurrency, 2),
            "gpu_memory_utilization": self.gpu_memory_utilization,
        }


@dataclass(frozen=True, kw_only=True)
class LiveComparison:
    predicted: Side  # the calculator, for the inventory's flags
    reported: Side  # the engine
    expected_blocks: int  # the calculator at the engine's utilization and block size
    fp8_blocks: int | None  # the calculator with an fp8 KV cache (None: the inventory has one)
    tolerance_blocks: int
    max_model_len: int
    version: str  # the vLLM version the inventory says ("" when it says none)
    causes: tuple[Cause, ...]

    @property
    def difference_blocks(self) -> int:
        return self.reported.blocks - self.predicted.blocks

    @property
    def difference_tokens(self) -> int:
        return self.reported.tokens - self.predicted.tokens

    @property
    def difference_pct(self) -> float | None:
        return _pct(self.difference_blocks, self.predicted.blocks)

    @property
    def residual_blocks(self) -> int:
        """Reported minus expected: what the engine's utilization and block size leave unexplained."""
        return self.reported.blocks - self.expected_blocks

    @property
    def residual_pct(self) -> float | None:
        return _pct(self.residual_blocks, self.expected_blocks)

    @property
    def drifted(self) -> bool:
        return bool(self.causes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON kept in InstanceSizing.result["live"] and the finding's numbers."""
        return {
            "predicted": self.predicted.to_dict(),
            "reported": self.reported.to_dict(),
            "difference": {
                "blocks": self.difference_blocks,
                "tokens": self.difference_tokens,
                "pct": _rounded(self.difference_pct),
                "max_concurrency": round(self.reported.max_concurrency - self.predicted.max_concurrency, 2),
            },
            "expected_blocks": self.expected_blocks,
            "residual": {"blocks": self.residual_blocks, "pct": _rounded(self.residual_pct)},
            "fp8_blocks": self.fp8_blocks,
            "tolerance": {
                "blocks": self.tolerance_blocks,
                "share": TOLERANCE_SHARE,
                "gib_per_gpu": TOLERANCE_BYTES / GiB,
            },
            "max_model_len": self.max_model_len,
            "vllm_version": self.version,
            "causes": [str(cause) for cause in self.causes],
            "drifted": self.drifted,
        }

    def issue(self) -> Issue | None:
        """The capacity finding for a drift; None within tolerance."""
        if not self.causes:
            return None
        # Less cache than planned, or a utilization the inventory does not know: the capacity
        # the console plans with is wrong. More blocks or another block size: the record is.
        warn = Cause.FEWER_BLOCKS in self.causes or Cause.UTILIZATION in self.causes
        return Issue(
            code=CODE,
            severity="warning" if warn else "info",
            title_message=later(
                "The engine reports %(reported)s KV cache blocks, the sizing predicts %(predicted)s "
                "(%(pct)s)",
                reported=f"{self.reported.blocks:,}",
                predicted=f"{self.predicted.blocks:,}",
                pct=_signed_pct(self.difference_pct),
            ),
            detail_message=_joined([_explanation(self, cause) for cause in self.causes]),
            fix_messages=tuple(_fix(self, cause) for cause in self.causes),
            numbers=self.to_dict(),
        )


def compare(sizing: Sizing, reported: Reported, *, version: str = "") -> LiveComparison:
    """The prediction (`sizing`, for the inventory's flags) against the engine's report.
    version: the vLLM version the inventory says, named when the accounting may have changed."""
    spec, resolved = sizing.spec, sizing.resolved
    mml = resolved.max_model_len
    predicted = _side(sizing, sizing.capacity.num_blocks, resolved.gpu_memory_utilization)
    block_size = reported.block_size or sizing.kv.block_size
    utilization = reported.gpu_memory_utilization or resolved.gpu_memory_utilization
    expected = _variant(sizing, gpu_memory_utilization=utilization, block_size=block_size)
    if expected is not None:
        expected_blocks = expected.capacity.num_blocks
        reported_side = _side(expected, reported.num_gpu_blocks, reported.gpu_memory_utilization)
    else:  # a block size the calculator cannot lay out: the same tokens in other blocks
        expected_blocks = sizing.capacity.num_blocks * sizing.kv.block_size // block_size
        tokens = reported.num_gpu_blocks * block_size
        reported_side = Side(
            blocks=reported.num_gpu_blocks,
            block_size=block_size,
            tokens=tokens,
            max_concurrency=tokens / mml,
            gpu_memory_utilization=reported.gpu_memory_utilization,
        )
    tolerance = tolerance_blocks(expected or sizing, expected_blocks)
    fp8_blocks = None
    if not spec.kv_cache_dtype.startswith("fp8"):
        fp8 = _variant(
            sizing, gpu_memory_utilization=utilization, block_size=block_size, kv_cache_dtype="fp8"
        )
        fp8_blocks = fp8.capacity.num_blocks if fp8 is not None else None

    causes = []
    if (
        reported.gpu_memory_utilization is not None
        and abs(reported.gpu_memory_utilization - resolved.gpu_memory_utilization) > UTILIZATION_EPSILON
    ):
        causes.append(Cause.UTILIZATION)
    if reported.block_size is not None and reported.block_size != sizing.kv.block_size:
        causes.append(Cause.BLOCK_SIZE)
    residual = reported.num_gpu_blocks - expected_blocks
    if residual < -tolerance:
        causes.append(Cause.FEWER_BLOCKS)
    elif residual > tolerance:
        causes.append(Cause.MORE_BLOCKS)
    return LiveComparison(
        predicted=predicted,
        reported=reported_side,
        expected_blocks=expected_blocks,
        fp8_blocks=fp8_blocks,
        tolerance_blocks=tolerance,
        max_model_len=mml,
        version=version.strip(),
        causes=tuple(causes),
    )


def tolerance_blocks(sizing: Sizing, expected_blocks: int) -> int:
    """The larger of TOLERANCE_SHARE of the expected blocks and TOLERANCE_BYTES in blocks."""
    block_bytes = sizing.kv.page_bytes * sizing.kv.group_size
    return max(ceil(TOLERANCE_SHARE * expected_blocks), int(TOLERANCE_BYTES // block_bytes))


def _variant(sizing: Sizing, **changes: Any) -> Sizing | None:
    """The calculator again with some inputs changed; `sizing` itself when nothing changes,
    None when the changes name no launch."""
    spec = sizing.spec
    if changes.get("block_size") == sizing.kv.block_size:
        changes["block_size"] = spec.block_size  # the layout's own block size, as the spec left it
    if changes.get("gpu_memory_utilization") == sizing.resolved.gpu_memory_utilization:
        changes["gpu_memory_utilization"] = spec.gpu_memory_utilization
    if all(getattr(spec, key) == value for key, value in changes.items()):
        return sizing
    try:
        return compute(replace(spec, **changes))
    except (SpecError, ValueError):
        return None


def _side(sizing: Sizing, blocks: int, utilization: float | None) -> Side:
    """Blocks as vLLM logs them: tokens ("GPU KV cache size") and maximum concurrency."""
    kv = sizing.kv
    capacity = kv_cache.capacity(
        kv,
        blocks * kv.page_bytes * kv.group_size,
        max_model_len=sizing.resolved.max_model_len,
        behaviour=sizing.resolved.behaviour,
    )
    return Side(
        blocks=blocks,
        block_size=kv.block_size,
        tokens=capacity.tokens,
        max_concurrency=capacity.max_concurrency,
        gpu_memory_utilization=utilization,
    )


def _pct(part: float, whole: float) -> float | None:
    return 100.0 * part / whole if whole else None


def _rounded(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def _signed_pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f} %"


def _joined(parts: list[Message]) -> Message:
    joined = parts[0]
    for part in parts[1:]:
        joined = later("%(first)s %(second)s", first=joined, second=part)
    return joined


def _explanation(live: LiveComparison, cause: Cause) -> Message:
    if cause is Cause.UTILIZATION:
        return later(
            "The engine runs another gpu_memory_utilization than the inventory says: %(reported)s, "
            "not %(inventory)s; at %(reported)s the calculator predicts %(expected)s blocks.",
            reported=f"{live.reported.gpu_memory_utilization:g}",
            inventory=f"{live.predicted.gpu_memory_utilization:g}",
            expected=f"{live.expected_blocks:,}",
        )
    if cause is Cause.BLOCK_SIZE:
        return later(
            "The block size differs: the engine's blocks hold %(reported)s tokens, the sizing's "
            "%(predicted)s; in tokens the engine has %(reported_tokens)s, the sizing %(predicted_tokens)s.",
            reported=live.reported.block_size,
            predicted=live.predicted.block_size,
            reported_tokens=f"{live.reported.tokens:,}",
            predicted_tokens=f"{live.predicted.tokens:,}",
        )
    values = {
        "blocks": f"{abs(live.residual_blocks):,}",
        "pct": _signed_pct(live.residual_pct),
        "tolerance": f"{live.tolerance_blocks:,}",
    }
    if cause is Cause.FEWER_BLOCKS:
        if live.version:
            return later(
                "%(blocks)s fewer blocks than predicted (%(pct)s), beyond the tolerance of %(tolerance)s: "
                "another process holds GPU memory, or the version's accounting changed (the inventory "
                "says vLLM %(version)s).",
                version=live.version,
                **values,
            )
        return later(
            "%(blocks)s fewer blocks than predicted (%(pct)s), beyond the tolerance of %(tolerance)s: "
            "another process holds GPU memory, or the version's accounting changed (the inventory "
            "names no vLLM version).",
            **values,
        )
    more = later(
        "%(blocks)s more blocks than predicted (%(pct)s), beyond the tolerance of %(tolerance)s: the "
        "inventory's flags are not the ones running (for example a smaller max_model_len or an fp8 "
        "KV cache).",
        **values,
    )
    if live.fp8_blocks and abs(live.reported.blocks - live.fp8_blocks) <= live.tolerance_blocks:
        return later(
            "%(first)s %(second)s",
            first=more,
            second=later(
                "With an fp8 KV cache the calculator predicts %(blocks)s blocks, within the tolerance.",
                blocks=f"{live.fp8_blocks:,}",
            ),
        )
    return more


def _fix(live: LiveComparison, cause: Cause) -> Message:
    if cause is Cause.UTILIZATION:
        return later(
            "record the engine's %(value)s in the inventory, or restart it with %(flag)s",
            value=f"gpu_memory_utilization {live.reported.gpu_memory_utilization:g}",
            flag=f"--gpu-memory-utilization {live.predicted.gpu_memory_utilization:g}",
        )
    if cause is Cause.BLOCK_SIZE:
        return later(
            "restart the engine with %(flag)s, the block size the sizing assumes, or size the instance "
            "on the sizing page with the engine's %(reported)s",
            flag=f"--block-size {live.predicted.block_size}",
            reported=f"--block-size {live.reported.block_size}",
        )
    if cause is Cause.FEWER_BLOCKS:
        return later(
            "look for other processes on the instance's GPUs (%(command)s) and compare the running "
            "vLLM version with the inventory's",
            command="nvidia-smi",
        )
    return later(
        "compare the engine's launch command with the inventory's flags (%(flags)s)",
        flags="--max-model-len, --kv-cache-dtype, --quantization, --tensor-parallel-size",
    )
