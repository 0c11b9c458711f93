"""Which programs wrote a log, from its first 64 KB: the triage says what it read."""

from __future__ import annotations

import re2

SIGNATURES = (
    ("vllm", rb"(?:\(APIServer pid=|\(EngineCore|vllm\.entrypoints|vllm/|INFO \d\d-\d\d [\d:]+ \[)"),
    ("tgi", rb"text_generation_(?:router|launcher|server)|text-generation-launcher"),
    ("ollama", rb"(?:ollama|source=\S+\.go:\d+)"),
    ("nginx_error", rb"\[(?:error|warn|crit|alert|emerg)\] \d+#\d+:"),
    (
        "nginx_access",
        rb'(?:\d+\.\d+\.\d+\.\d+ - \S+ \[[^\]]+\] "(?:GET|POST|PUT|DELETE|HEAD|OPTIONS) '
        rb'|\{[^\n]*"remote_addr":[^\n]*"status":)',
    ),
    ("kernel", rb"(?:kernel: |^\[\s*\d+\.\d+\] |Out of memory: Killed process|NVRM: Xid)"),
    ("docker_inspect", rb'"(?:OOMKilled|ExitCode)":'),
    ("kubectl_describe", rb"(?m)^(?:Namespace|Containers|Last State|Events):"),
)
_COMPILED = tuple((name, re2.compile(pattern)) for name, pattern in SIGNATURES)


def detect(head: bytes) -> list[str]:
    return [name for name, pattern in _COMPILED if pattern.search(head)]
