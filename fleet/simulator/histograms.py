"""Plain cumulative histograms and the bucket boundaries the engines use.

The simulator keeps its own small histogram (bounds, per-bucket counts, sum) instead of
prometheus_client objects, so a thousand instances cost a few lists each and an
observation of the same value many times (one decode step emitting k tokens) is one call.
The vLLM boundaries are V1's (`vllm/v1/metrics/buckets.py`, see the vLLM reference §1.3).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from prometheus_client.utils import floatToGoString

REQUEST_LATENCY = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TIME_TO_FIRST_TOKEN = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
INTER_TOKEN_LATENCY = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
ITERATION_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# 0.8 used the CUDA-graph capture sizes; this is its list for --enforce-eager.
ITERATION_TOKENS_0_8 = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
REQUEST_PARAMS_N = (1, 2, 5, 10, 20)


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to max_value."""
    bounds: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(bounds)
            bounds.append(value)
        exponent += 1


def geometric_buckets(*, start: float, factor: float, count: int) -> tuple[float, ...]:
    return tuple(start * factor ** (i + 1) for i in range(count))


def linear_buckets(*, top: float, count: int) -> tuple[float, ...]:
    return tuple(top / count * (i + 1) for i in range(count))


@dataclass(frozen=True, kw_only=True)
class BucketSet:
    """The boundaries one engine's histograms use, by family."""

    latency: tuple[float, ...] = REQUEST_LATENCY
    first_token: tuple[float, ...] = TIME_TO_FIRST_TOKEN
    inter_token: tuple[float, ...] = INTER_TOKEN_LATENCY
    iteration_tokens: tuple[float, ...] = ITERATION_TOKENS
    request_tokens: tuple[float, ...] = (1, 2, 5)


class Histogram:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last slot is +Inf
        self.sum = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        # A sample equal to a boundary belongs to that bucket (le = less or equal).
        self.counts[bisect_left(self.bounds, value)] += times
        self.sum += value * times

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, cumulative count) pairs, ending with +Inf, as Prometheus exposes them."""
        pairs: list[tuple[str, int]] = []
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            pairs.append((format_bound(bound), running))
        pairs.append(("+Inf", running + self.counts[-1]))
        return pairs


def format_bound(bound: float) -> str:
    # As prometheus_client writes boundaries: 1 -> "1.0", 0.001 -> "0.001", 1e6 -> "1e+06".
    return floatToGoString(bound)
