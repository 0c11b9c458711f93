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
    (
        "sglang",
        rb"(?:sglang|\[\d{4}-\d\d-\d\d [\d:]+(?: TP\d+)?\] "
        rb"(?:Scheduler|Decode batch|Prefill batch|server_args))",
    ),
    (
        "ray",
        rb"(?:\(raylet\)|ray::|ray\.exceptions|\(\w+ pid=\d+(?:, ip=[\d.]+)?\)|Started a local Ray instance)",
    ),
    ("llama.cpp", rb"(?:llama_model_load|llm_load_tensors|llama_new_context|ggml_cuda_init|load_tensors:)"),
    ("triton", rb"(?:tritonserver|Triton Inference Server|model_repository_manager)"),
    ("trtllm", rb"\[TensorRT-LLM\]"),
    ("lmdeploy", rb"(?:lmdeploy|\[TM\]\[)"),
    ("systemd", rb"(?:systemd\[\d+\]|\.service: )"),
    ("docker", rb"(?:Error response from daemon|docker: |\{\"log\":\")"),
)
_COMPILED = tuple((name, re2.compile(pattern)) for name, pattern in SIGNATURES)


def detect(head: bytes) -> list[str]:
    """Every program whose signature is in the head (the raw bytes: a JSON log's fields and
    colour codes are signatures too)."""
    return [name for name, pattern in _COMPILED if pattern.search(head)]
