"""The /metrics bodies of the malformed_metrics and huge_metrics faults.

Malformed: a truncated sample line and an HTML error page in the middle, which a
Prometheus text parser rejects. Huge: the real page followed by one high-cardinality
padding family (`vllm:sim_padding`, one series per fake id) up to the requested size, so
the body still parses and only a size limit stops a scraper.
"""

from __future__ import annotations

from functools import lru_cache

MIB = 1024 * 1024


def malformed_metrics(*, model: str) -> bytes:
    return (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="{model}" 3.0\n'
        "<html><head><title>502 Bad Gateway</title></head><body>upstream sent garbage</body></html>\n"
        'vllm:kv_cache_usage_perc{engine="0"} not-a-number\n'
    ).encode()


def huge_metrics(*, real: bytes, size_mb: float) -> bytes:
    return real + _padding(int(size_mb * MIB) - len(real))


@lru_cache(maxsize=4)
def _padding(size: int) -> bytes:
    head = b"# HELP vllm:sim_padding One series per request id (a label-cardinality explosion).\n"
    head += b"# TYPE vllm:sim_padding gauge\n"
    line_len = len(_line(0))
    count = max(0, (size - len(head)) // line_len)
    return head + b"".join(_line(i) for i in range(count))


def _line(i: int) -> bytes:
    return b'vllm:sim_padding{request_id="cmpl-%012x"} 1.0\n' % i
