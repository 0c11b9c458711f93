"""What an instance's spec and active faults make its engine run with (EngineFeatures).

Called whenever the faults change and when an engine is (re)built, after the knobs of the
older faults are set (SimInstance._apply_effects): speculative decoding and LoRA come from
the spec, sleep, held KV transfers, a collapsed prefix cache, a low draft acceptance and
starving adapters from the faults (faults.py lists them, docs/vllm-metrics.md §6 says
which judgement each one is for).
"""

from __future__ import annotations

from fleet.simulator.engine import Engine, EngineFeatures
from fleet.simulator.faults import FaultBook, FaultKind
from fleet.simulator.spec import InstanceSpec


def apply_engine_effects(engine: Engine, *, spec: InstanceSpec, faults: FaultBook) -> None:
    engine.features = features_for(spec, faults)
    engine.sleep(faults.param(FaultKind.ENGINE_ASLEEP, "level") or 0, by_fault=True)


def features_for(spec: InstanceSpec, faults: FaultBook) -> EngineFeatures:
    vllm = spec.engine == "vllm"
    acceptance = faults.param(FaultKind.SPEC_DECODE_LOW_ACCEPTANCE, "acceptance")
    keep = faults.param(FaultKind.PREFIX_CACHE_COLLAPSE, "keep")
    hold = faults.get(FaultKind.WAITING_DEFERRED)
    return EngineFeatures(
        spec_tokens=spec.num_speculative_tokens if vllm else 0,
        spec_acceptance=spec.spec_acceptance if acceptance is None else acceptance,
        lora_adapters=spec.lora_adapters if vllm else (),
        max_loras=spec.max_loras,
        lora_starved=FaultKind.LORA_STARVING in faults,
        prefix_hit_factor=1.0 if keep is None else keep,
        hold_deferred=hold.params["n"] if hold is not None else 0,
        hold_prompt_tokens=hold.params["prompt_tokens"] if hold is not None else 1000,
        hold_output_tokens=hold.params["output_tokens"] if hold is not None else 200,
    )
