"""How long one engine step takes, from the model size and the GPU.

A decode step reads the (active) weights once and the KV of every sequence in the batch,
so it is memory-bound: its time grows with the batch and with the context the batch holds,
and tokens/s per sequence falls as the batch grows. Prefill is compute-bound: linear in
the prompt for common lengths, with an attention term that is quadratic in the position
and matters only for very long prompts (corrections #12): it adds about 12% to a 16K prompt
and 25% to a 32K one, so 16K takes about 18x as long as 1K, not 256x. Compute is the
board's dense 16-bit peak at 50% utilization, which puts an 8B model on an H100 at about
31K prefill tokens/s, and memory traffic runs at 70% of peak bandwidth: about 9 ms per
decode step at batch 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet import gpu_catalog
from fleet.simulator.spec import InstanceSpec

BANDWIDTH_EFFICIENCY = 0.7
COMPUTE_EFFICIENCY = 0.5
# Dense BF16/FP16 tensor TFLOP/s by catalogue key (vendor figures, no sparsity).
PEAK_TFLOPS = {
    "a100-40gb": 312, "a100-80gb": 312, "h100-80gb": 989, "h100-nvl": 835, "h200-141gb": 989,
    "b200-180gb": 2250, "l40s": 362, "l40": 181, "l4": 121, "a10": 125, "a10g": 70,
    "rtx-4090": 165, "rtx-6000-ada": 364, "t4": 65, "v100-32gb": 125, "mi300x": 1307, "mi325x": 1307,
}  # fmt: skip
DEFAULT_TFLOPS = 300
STEP_OVERHEAD_S = 0.002  # scheduling, sampling and the Python around each step
QUADRATIC_KNEE_TOKENS = 131072.0  # a token at position knee/2 costs twice a token at 0


@dataclass(frozen=True, kw_only=True)
class PerfModel:
    weights_read_s: float  # reading the active weights once
    kv_read_s_per_token: float  # reading one token of KV context
    compute_s_per_token: float  # 2 x active parameters FLOPs for one token
    overhead_s: float = STEP_OVERHEAD_S
    knee_tokens: float = QUADRATIC_KNEE_TOKENS

    def prefill_seconds(self, *, start: int, end: int) -> float:
        """Compute time for prompt positions [start, end): linear plus attention.

        The cost of the token at position p is (1 + 2p / knee) x the linear cost, so a
        whole prompt of L tokens costs L x (1 + L / knee).
        """
        if end <= start:
            return 0.0
        linear = end - start
        attention = (end * end - start * start) / self.knee_tokens
        return (linear + attention) * self.compute_s_per_token

    def step_seconds(self, *, decode_seqs: int, context_tokens: int, prefill_s: float) -> float:
        """One engine step: memory traffic or compute, whichever is longer, plus overhead."""
        memory = self.weights_read_s + context_tokens * self.kv_read_s_per_token
        compute = decode_seqs * self.compute_s_per_token + prefill_s
        return self.overhead_s + max(memory, compute)

    def decode_step_seconds(self, *, batch: int, context_tokens: int) -> float:
        return self.step_seconds(decode_seqs=batch, context_tokens=context_tokens, prefill_s=0.0)


def perf_model_for(spec: InstanceSpec) -> PerfModel:
    gpu = gpu_catalog.get(spec.gpu_model)
    bandwidth = gpu.bandwidth_gbps * 1e9 * spec.gpu_count * BANDWIDTH_EFFICIENCY
    flops = PEAK_TFLOPS.get(spec.gpu_model, DEFAULT_TFLOPS) * 1e12 * spec.gpu_count * COMPUTE_EFFICIENCY
    active = (spec.active_params_b or spec.params_b) * 1e9
    return PerfModel(
        weights_read_s=active * spec.weight_bytes_per_param / bandwidth,
        kv_read_s_per_token=spec.kv_bytes_per_token_effective / bandwidth,
        compute_s_per_token=2 * active / flops,
    )
