"""What changes in vLLM's memory accounting from one release to the next.

Read from vLLM's sources (0.10 to 0.32, see research/vllm_memory.md): the default
gpu_memory_utilization, whether the request is rounded up, whether CUDA-graph memory is
taken from the KV budget, how the "GPU KV cache size" line counts tokens, how hybrid
layers are grouped, and the wording of the start-up errors. 0.33 and later size the
cache after warm-up with a different accounting; they are refused rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from core.i18n import later

DEFAULT_VERSION = "0.21"
OLDEST, NEWEST = (0, 10), (0, 32)

# The versions the sizing page offers, each the first release of a behaviour.
VERSION_CHOICES = (
    ("0.10", "0.10"),
    ("0.11", "0.11 – 0.13"),
    ("0.14", "0.14 – 0.19"),
    ("0.20", "0.20"),
    ("0.21", "0.21 – 0.32"),
)


class VersionError(ValueError):
    """A vLLM version the calculator does not model."""


@dataclass(frozen=True)
class VllmBehaviour:
    version: tuple[int, int]

    @property
    def label(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def default_gpu_memory_utilization(self) -> float:
        return 0.92 if self.version >= (0, 20) else 0.9

    @property
    def rounds_request_up(self) -> bool:
        """requested = ceil(total x utilization) from 0.14; a float before."""
        return self.version >= (0, 14)

    @property
    def subtracts_cuda_graphs(self) -> bool:
        """CUDA-graph memory is estimated and taken from the KV budget by default from 0.20."""
        return self.version >= (0, 20)

    @property
    def tokens_from_concurrency(self) -> bool:
        """0.21 logs tokens as int(max_concurrency x max_model_len); before, blocks // groups x block."""
        return self.version >= (0, 21)

    @property
    def widens_near_equal_groups(self) -> bool:
        """0.12 groups hybrid layers by the larger count when the counts are within 25 %."""
        return self.version >= (0, 12)

    @property
    def errors_link_docs(self) -> bool:
        """0.14 adds the conserving-memory link and names the device in its errors."""
        return self.version >= (0, 14)


def behaviour(version: str | None) -> VllmBehaviour:
    """The behaviour of a version string like "0.11.2", "v0.20.1" or "0.21"; blank is the default."""
    text = (version or "").strip().lstrip("v") or DEFAULT_VERSION
    match = re.match(r"^(\d+)\.(\d+)(?:[.+\-].*)?$", text)
    if not match:
        raise VersionError(later("vLLM version %(version)s is not like 0.11.2", version=repr(version)))
    parsed = (int(match[1]), int(match[2]))
    if parsed < OLDEST:
        raise VersionError(
            later(
                "vLLM %(version)s runs the V0 engine, whose memory accounting the calculator does not "
                "model (0.10 to 0.32 are modelled)",
                version=text,
            )
        )
    if parsed > NEWEST:
        raise VersionError(
            later(
                "vLLM %(version)s sizes its KV cache after warm-up with a new accounting the calculator "
                "does not model yet (0.10 to 0.32 are modelled)",
                version=text,
            )
        )
    return VllmBehaviour(parsed)


def nearest_choice(version: str, choices: Iterable[str]) -> str:
    """The newest of `choices` (like "0.11") not after `version` (like "v0.11.2"): the choice
    that covers it; the oldest choice for older versions, "" for text that is no version."""
    match = re.match(r"^v?(\d+)\.(\d+)", version.strip())
    if not match:
        return ""
    wanted = (int(match[1]), int(match[2]))
    ordered = sorted(choices, key=lambda c: tuple(int(p) for p in c.split(".")[:2]))
    chosen = ordered[0] if ordered else ""
    for choice in ordered:
        if tuple(int(p) for p in choice.split(".")[:2]) <= wanted:
            chosen = choice
    return chosen
