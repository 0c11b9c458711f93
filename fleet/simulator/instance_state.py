"""The JSON of GET /_sim/state: what an instance is doing, for tests and the demo."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet.simulator.instance import SimInstance


def instance_state(instance: SimInstance) -> dict[str, Any]:
    spec = instance.spec
    now = instance.clock()
    return {
        "name": spec.name,
        "engine": spec.engine,
        "version": spec.version,
        "served_model_name": spec.served_model_name,
        "port": instance.port,
        "listening": instance.listening,
        "exit_code": instance.exit_code,
        "oom_killed": instance.oom_killed,
        "restarts": instance.restarts,
        "engine_dead": instance.engine_dead,
        "gpus": instance.gpu_indices,
        "scheduler": _scheduler(instance),
        "counters": _counters(instance),
        "faults": instance.faults.to_list(now=now),
        "load": [asdict(p) for p in instance.traffic.profiles()],
        "clients": dict(instance.traffic.clients.most_common(20)),
    }


def _scheduler(instance: SimInstance) -> dict[str, Any]:
    engine, pool = instance.engine, instance.engine.pool
    return {
        "running": engine.num_running,
        "waiting": engine.num_waiting,
        "max_num_seqs": engine.max_num_seqs,
        "max_num_batched_tokens": engine.max_num_batched_tokens,
        "num_gpu_blocks": pool.total,
        "block_size": pool.block_size,
        "blocks_used": pool.used,
        "blocks_reserved": pool.reserved,
        "blocks_free": pool.free,
        "kv_cache_usage": round(pool.usage, 4),
        "busy_fraction": round(engine.busy_fraction, 3),
        "stalled": engine.knobs.stalled,
        "sleep_level": engine.sleep_level,
        "waiting_deferred": engine.waiting_by_reason()[1],
    }


def _counters(instance: SimInstance) -> dict[str, Any]:
    stats = instance.engine.stats
    return {
        "requests_received": stats.requests_received,
        "finished": dict(stats.finished),
        "prompt_tokens": stats.prompt_tokens,
        "generation_tokens": stats.generation_tokens,
        "num_preemptions": stats.num_preemptions,
        "prefix_cache_queries": stats.prefix_queries_tokens,
        "prefix_cache_hits": stats.prefix_hits_tokens,
    }
