"""TGI's /metrics page, a small subset of the router's tgi_* families (vLLM reference §5.1).

TGI exports through the Rust metrics-exporter-prometheus crate, not prometheus_client:
counters keep their names (no `_total` suffix), integers are written without ".0", and
histograms use the router's layouts, shortened here: durations a geometric series from
0.00015 s (x1.5), token counts 20 even steps up to the model's limits.
"""

from __future__ import annotations

from collections.abc import Iterator

from fleet.simulator.engine import Engine
from fleet.simulator.histograms import BucketSet, Histogram, geometric_buckets, linear_buckets
from fleet.simulator.spec import InstanceSpec

CONTENT_TYPE = "text/plain; charset=utf-8"
DURATIONS = geometric_buckets(start=0.0001, factor=1.5, count=35)


def tgi_buckets(spec: InstanceSpec) -> BucketSet:
    tokens = linear_buckets(top=spec.max_model_len, count=20)
    return BucketSet(
        latency=DURATIONS,
        first_token=DURATIONS,
        inter_token=DURATIONS,
        iteration_tokens=tokens,
        request_tokens=tokens,
    )


def render_tgi_metrics(*, engine: Engine) -> bytes:
    return "".join(_lines(engine)).encode()


def _lines(engine: Engine) -> Iterator[str]:
    stats = engine.stats
    yield from _family("tgi_queue_size", "gauge", "Current queue size", [("", engine.num_waiting)])
    yield from _family("tgi_batch_current_size", "gauge", "Current batch size", [("", engine.num_running)])
    max_tokens = sum(r.computed for r in engine.running)
    yield from _family(
        "tgi_batch_current_max_tokens", "gauge", "Maximum tokens for the current batch", [("", max_tokens)]
    )
    yield from _family(
        "tgi_request_count", "counter", "Total number of requests", [("", stats.requests_received)]
    )
    succeeded = stats.finished["stop"] + stats.finished["length"]
    yield from _family("tgi_request_success", "counter", "Number of successful requests", [("", succeeded)])
    steps = [('{method="prefill"}', stats.prefill_steps), ('{method="decode"}', stats.decode_steps)]
    yield from _family(
        "tgi_batch_inference_count", "counter", "Inference calls per method (prefill or decode)", steps
    )
    yield from _family(
        "tgi_batch_inference_success", "counter", "Number of successful inference calls per method", steps
    )
    yield from _histogram(
        "tgi_request_duration", "Total time spent processing the request (e2e latency)", stats.e2e_latency
    )
    yield from _histogram(
        "tgi_request_queue_duration", "Time spent in the queue per request", stats.queue_time
    )
    yield from _histogram(
        "tgi_request_inference_duration", "Request inference duration", stats.inference_time
    )
    yield from _histogram(
        "tgi_request_mean_time_per_token_duration",
        "Mean time per token per request (inter-token latency)",
        stats.request_time_per_output_token,
    )
    yield from _histogram("tgi_request_input_length", "Input token length per request", stats.prompt_len)
    yield from _histogram(
        "tgi_request_generated_tokens", "Generated tokens per request", stats.generation_len
    )
    yield from _histogram(
        "tgi_request_max_new_tokens", "Maximum new tokens per request", stats.max_generation_tokens
    )


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> Iterator[str]:
    yield f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"
    for labels, value in samples:
        yield f"{name}{labels} {_number(value)}\n"


def _histogram(name: str, help_text: str, hist: Histogram) -> Iterator[str]:
    yield f"# HELP {name} {help_text}\n# TYPE {name} histogram\n"
    running = 0
    for bound, count in zip(hist.bounds, hist.counts, strict=False):
        running += count
        yield f'{name}_bucket{{le="{bound:g}"}} {running}\n'
    yield f'{name}_bucket{{le="+Inf"}} {hist.count}\n'
    yield f"{name}_sum {_number(hist.sum)}\n{name}_count {hist.count}\n"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
