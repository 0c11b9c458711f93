"""The KV block pool: num_gpu_blocks blocks of block_size tokens, preallocated.

Running out of blocks is not an out-of-memory error (corrections #3): the pool is fixed at
start-up, and when it is full the scheduler preempts or keeps requests waiting.
`reserved` models blocks held by something else (the kv_near_full fault).
"""

from __future__ import annotations

import math


class BlockPool:
    __slots__ = ("total", "used", "reserved", "block_size")

    def __init__(self, *, total: int, block_size: int) -> None:
        self.total = total
        self.block_size = block_size
        self.used = 0
        self.reserved = 0

    @property
    def free(self) -> int:
        return max(0, self.total - self.used - self.reserved)

    @property
    def usage(self) -> float:
        """Share of blocks taken (vllm:kv_cache_usage_perc, 1 = full)."""
        return min(1.0, (self.used + self.reserved) / self.total)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def allocate(self, blocks: int) -> bool:
        if blocks > self.free:
            return False
        self.used += blocks
        return True

    def release(self, blocks: int) -> None:
        self.used -= blocks

    def reserve_fraction(self, fraction: float) -> None:
        self.reserved = math.ceil(self.total * fraction)
