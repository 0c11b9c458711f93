"""The shipped troubleshooting trees (diagnostics/trees/data/*.yaml) against the guide and its
corrections: every branch, check and command of chapters 2.2 to 2.5, the decision tree of 5.1
and every row of appendix A has a node (COVERAGE); every config link renders with its
generator; no text outside `corrections` repeats a claim docs/guide-corrections.md marks as wrong; the
metric names are the ones vLLM exposes today."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from diagnostics.configgen import registry
from diagnostics.trees.model import DATA, Node, Tree, load

TREE_IDS = {"guide", "timeouts", "rate_limiting", "oom", "cuda", "model_loading"}

# (guide section or appendix-A row, tree id, node id, a keyword the node's text must mention)
COVERAGE: tuple[tuple[str, str, str, str], ...] = (
    # 2.2.1 Telling the timeouts apart
    ("2.2.1 curl -w phase timings", "timeouts", "phase", "time_starttransfer"),
    ("2.2.1 Connect > 1 s -> connection timeout", "timeouts", "phase", "over 1 s"),
    ("2.2.1 TTFB > 5 s -> TTFT", "timeouts", "phase", "TTFB over 5 s"),
    ("2.2.1 Total - TTFB large -> low TPS", "timeouts", "phase", "total minus TTFB"),
    ("2.2.1 request fails -> read the error code", "guide", "error_code", "Connection refused"),
    # 2.2.2 TTFT
    (
        "2.2.2 KV cache usage check (fragmentation, corrected)",
        "timeouts",
        "ttft_waiting_why",
        "kv_cache_usage_perc",
    ),
    ("2.2.2 KV cache full -> wait and preemption", "timeouts", "ttft_kv_full", "preempted"),
    ("2.2.2 long prompt prefill", "timeouts", "ttft_long_prefill", "chunked prefill"),
    ("2.2.2 prefill time metric", "timeouts", "ttft_prompt_len", "request_prefill_time_seconds"),
    ("2.2.2 GPU compute saturated (nvidia-smi dmon)", "timeouts", "ttft_gpu_saturated", "nvidia-smi dmon"),
    ("2.2.2 GPU saturated check", "timeouts", "ttft_gpu", "nvidia-smi dmon -s u"),
    ("2.2.2 scheduling delay, waiting > 10", "timeouts", "ttft_queue", "num_requests_waiting"),
    # 2.2.3 TPS
    ("2.2.3 batch full: running near max-num-seqs", "timeouts", "tps_batch", "num_requests_running"),
    ("2.2.3 swap (V0 only) -> preemption", "timeouts", "tps_preempt", "num_preemptions_total"),
    ("2.2.3 swap fix: lower max-num-seqs or max-model-len", "timeouts", "tps_preemption", "--max-num-seqs"),
    ("2.2.3 GPU temperature check", "timeouts", "tps_throttle", "temperature.gpu"),
    ("2.2.3 thermal throttling fix: cooling", "timeouts", "tps_thermal", "airflow"),
    ("2.2.3 NUMA: nvidia-smi topo -m", "timeouts", "tps_numa", "nvidia-smi topo -m"),
    ("2.2.3 NUMA: numactl binding", "timeouts", "tps_numa_fix", "numactl --cpunodebind"),
    # 2.2.4 Connection timeouts
    ("2.2.4 step 1: port listening (ss -tlnp)", "timeouts", "connect_listening", "ss -tlnp"),
    ("2.2.4 step 2: firewall (iptables)", "timeouts", "connect_firewall_block", "iptables -L -n"),
    ("2.2.4 step 2: firewall (firewalld)", "timeouts", "connect_firewall_block", "firewall-cmd --list-all"),
    ("2.2.4 step 3: reachability (telnet, nc)", "timeouts", "connect_reach", "nc -zv"),
    ("2.2.4 step 4: the reverse proxy (curl -I)", "timeouts", "connect_reach", "curl -I"),
    ("2.2.4 the proxy's upstream", "timeouts", "connect_gateway", "proxy_connect_timeout"),
    ("2.2.4 process alive but not listening (ps)", "timeouts", "connect_process", "ps aux"),
    ("2.2.4 the engine's log (journalctl, docker logs)", "timeouts", "connect_process", "journalctl -u vllm"),
    ("2.2.4 still loading: the ready line", "timeouts", "connect_loading", "Starting vLLM API server"),
    ("2.2.4 listen backlog (somaxconn)", "timeouts", "connect_backlog", "somaxconn"),
    ("2.2.4 conntrack table full", "timeouts", "conntrack_fix", "nf_conntrack_max"),
    ("2.1 network timeout: packet loss", "timeouts", "packet_loss", "mtr"),
    ("2.1 network timeout: MTU", "timeouts", "mtu", "ping -M do"),
    ("2.1 network timeout: load balancer idle timeout", "timeouts", "lb_idle", "idle timeout"),
    # 2.2.5 The timeout chain
    ("2.2.5 chain: engine < gateway < client", "timeouts", "chain_order", "proxy_read_timeout"),
    ("2.2.5 vLLM side: the budget is max_tokens", "timeouts", "chain_engine_budget", "max_tokens"),
    ("2.2.5 nginx proxy_read_timeout 150s", "timeouts", "chain_gateway_short", "150s"),
    ("2.2.5 nginx SSE: proxy_buffering off", "timeouts", "sse_buffering", "proxy_buffering off"),
    ("2.2.5 Python client timeouts", "timeouts", "chain_client_short", "read timeout"),
    ("2.2.5 stream mode timeout", "timeouts", "chain_client_short", "sock_read"),
    # 2.3 Rate limiting
    ("2.3.1 which layer: response headers", "rate_limiting", "source", "Retry-After"),
    ("2.3.1 X-RateLimit-* headers", "rate_limiting", "source", "X-RateLimit"),
    ("2.3.1 vLLM never sends 429", "rate_limiting", "vllm_never", "never"),
    ("2.3.1 TGI Model is overloaded", "rate_limiting", "tgi_overloaded", "Model is overloaded"),
    ("2.3.2 launch flags (ps aux)", "rate_limiting", "engine_queue", "ps aux"),
    ("2.3.2 max-num-seqs sizing (80 x 0.9 - 18)", "rate_limiting", "queue_kv", "54 GB"),
    ("2.3.2 max-num-seqs tuning", "rate_limiting", "queue_seqs", "--max-num-seqs"),
    ("2.3.2 max-num-batched-tokens tuning", "rate_limiting", "batched_tokens", "65536"),
    ("2.3.3 nginx limit_req zones", "rate_limiting", "nginx_which", "limiting requests"),
    ("2.3.3 per-API-key zone", "rate_limiting", "per_key_limit", "rate_per_key"),
    ("2.3.3 limit_req_status 429 instead of 503", "guide", "g_nginx_503_limit", "limit_req_status 429"),
    ("2.3.4 token bucket: rate and burst", "rate_limiting", "burst_vs_rate", "burst"),
    ("2.3.5 tuning rate and burst", "rate_limiting", "raise_ip_rate", "nodelay"),
    ("3.2 anonymous bucket (corrections #15)", "rate_limiting", "anonymous_bucket", "anonymous"),
    ("2.1 token quota exhausted", "rate_limiting", "token_quota", "quota"),
    # 2.4 OOM
    ("2.4.1 step 1: memory per GPU", "oom", "gpu_when", "--query-gpu=index,name,memory.total"),
    ("2.4.1 step 1: memory per process", "oom", "gpu_runtime_others", "--query-compute-apps"),
    ("2.4.1 step 1: nvidia-smi -l 1", "oom", "gpu_runtime_others", "nvidia-smi -l 1"),
    ("2.4.1 step 2: the start-up memory log", "oom", "gpu_startup_msg", "Available KV cache memory"),
    ("2.4.1 step 3: memory composition", "oom", "startup_no_kv", "gpu_memory_utilization"),
    ("2.4.1 start-up OOM: quantization", "oom", "startup_weights_too_big", "--quantization fp8"),
    ("2.4.1 start-up OOM: tensor parallel", "oom", "startup_weights_too_big", "--tensor-parallel-size 2"),
    ("2.4.1 start-up OOM: lower utilization (corrected)", "oom", "startup_weights_too_big", "does not help"),
    ("2.4.1 max_model_len does not fit the KV cache", "oom", "startup_max_model_len", "estimated maximum"),
    ("2.4.1 runtime 'KV not enough' -> not an OOM", "oom", "kv_too_many_seqs", "--max-num-seqs"),
    ("2.4.1 runtime OOM: activation peaks", "oom", "runtime_activation_peak", "--max-num-batched-tokens"),
    ("2.4.1 runtime OOM: other processes", "oom", "runtime_other_process", "Another process"),
    ("2.4.1 long conversations: limit the length", "oom", "kv_long_context", "--max-model-len 16384"),
    ("2.4.2 step 1: dmesg OOM log", "oom", "which", "dmesg -T"),
    ("2.4.2 step 2: free -h", "oom", "cpu_when", "free -h"),
    ("2.4.2 step 3: largest processes", "oom", "cpu_when", "--sort=-%mem"),
    ("2.4.2 step 4: /proc/meminfo", "oom", "cpu_when", "/proc/meminfo"),
    ("2.4.2 loading peak: file size x 1.5", "oom", "cpu_load_peak", "1.5"),
    ("2.4.2 loading peak: du -sh", "oom", "cpu_load_peak", "du -sh"),
    ("2.4.2 tokenizer leak", "oom", "cpu_leak", "tokenizer"),
    ("2.4.2 no swap configured", "oom", "cpu_no_swap", "swapon"),
    ("2.4.3 kubectl describe pod Last State", "oom", "container_confirm", "Last State"),
    ("2.4.3 the container's resources", "oom", "container_confirm", "resources"),
    ("2.4.3 docker inspect OOMKilled", "oom", "container_confirm", "OOMKilled"),
    ("2.4.3 docker inspect HostConfig.Memory", "oom", "container_confirm", "HostConfig.Memory"),
    ("2.4.3 limit = peak + 20 %", "oom", "container_limit", "20 %"),
    ("2.4.3 docker --memory-swap", "oom", "container_limit", "--memory-swap"),
    ("2.4.4 OOM quick table: which memory", "oom", "which", "Memory cgroup out of memory"),
    # 2.5 CUDA and other errors
    ("2.5.1 torch OOM vs CUDA error: out of memory", "cuda", "oom_kind", "torch.OutOfMemoryError"),
    ("2.5.1 check processes before a reset", "cuda", "cuda_oom_held", "--query-compute-apps"),
    ("2.5.1 nvidia-smi --gpu-reset", "cuda", "gpu_reset", "--gpu-reset"),
    ("2.5.2 CUDA_LAUNCH_BLOCKING", "cuda", "assert_where", "CUDA_LAUNCH_BLOCKING=1"),
    ("2.5.2 damaged weights (NaN scan)", "cuda", "weights_nan", "NaN"),
    ("2.5.2 abnormal input: token ids", "cuda", "assert_token_ids", "vocab"),
    ("2.5.2 FP16 overflow -> bf16", "cuda", "fp16_overflow", "--dtype bfloat16"),
    ("2.5.3 GPU topology", "cuda", "nccl_topology", "nvidia-smi topo -m"),
    ("2.5.3 NCCL version vs torch", "cuda", "nccl_version", "torch.cuda.nccl.version()"),
    ("2.5.3 NCCL_SOCKET_IFNAME", "cuda", "nccl_ifname", "NCCL_SOCKET_IFNAME"),
    ("2.5.3 NCCL_IB_DISABLE", "cuda", "nccl_ifname", "NCCL_IB_DISABLE=1"),
    ("2.5.3 /dev/shm size", "cuda", "nccl_shm", "df -h /dev/shm"),
    ("2.5.3 docker --shm-size", "cuda", "nccl_shm_fix", "--shm-size=8g"),
    ("2.5.3 Kubernetes emptyDir Memory", "cuda", "nccl_shm_fix", "emptyDir"),
    ("2.5.3 NCCL_DEBUG=INFO", "cuda", "nccl_debug", "NCCL_DEBUG=INFO"),
    ("2.5.3 peer-to-peer", "cuda", "nccl_p2p", "NCCL_P2P_DISABLE"),
    ("2.1 CUDA version mismatch", "cuda", "version_check", "torch.version.cuda"),
    ("2.1 driver too old", "cuda", "driver_too_old", "driver"),
    ("2.1 GPU hardware: Xid", "cuda", "hw_xid", "Xid"),
    ("2.1 GPU hardware: ECC", "cuda", "hw_xid", "nvidia-smi -q -d ECC"),
    ("2.5.4 weights: sha256sum", "model_loading", "corrupt_check", "sha256sum"),
    (
        "2.5.4 weights: huggingface-cli download",
        "model_loading",
        "corrupt_redownload",
        "huggingface-cli download",
    ),
    ("2.5.4 disk: df -h", "model_loading", "disk_where", "df -h"),
    ("2.5.4 disk: model sizes, 40-50 GB", "model_loading", "disk_models", "40 to 50 GB"),
    ("2.5.4 disk: du -sh old models", "model_loading", "disk_models", "du -sh"),
    ("2.5.4 disk: HF cache location", "model_loading", "disk_hf_cache", "HF_HOME"),
    ("2.5.4 disk: /tmp", "model_loading", "disk_tmp", "TMPDIR"),
    ("2.5.4 safetensors: safe_open check", "model_loading", "st_kind", "safe_open"),
    ("2.5.4 safetensors: header too large", "model_loading", "st_lfs_pointer", "Git LFS"),
    ("2.5.4 safetensors: incomplete metadata", "model_loading", "st_truncated", "resumes"),
    (
        "2.5.4 safetensors: .bin and .safetensors mixed",
        "model_loading",
        "st_mixed",
        "--load-format safetensors",
    ),
    ("2.5.4 not enough host memory to load", "model_loading", "load_host_ram", "1.5"),
    ("2.5.4 not enough GPU memory to load", "model_loading", "load_gpu", "--tensor-parallel-size 2"),
    ("B --trust-remote-code", "model_loading", "trust_remote", "--trust-remote-code"),
    ("B flags that do not exist", "model_loading", "bad_flags", "--max-paddings"),
    ("2.5.5 GPU memory status", "cuda", "torch_oom", "nvidia-smi --query-gpu=index,memory.total"),
    ("2.5.5 system memory", "cuda", "torch_oom", "free -h"),
    ("2.5.5 usage thresholds (90 % used is by design)", "cuda", "torch_oom", "by design"),
    # 5.1 The decision tree
    ("5.1 symptom first", "guide", "symptom", "slow"),
    ("5.1 429 -> which layer", "guide", "err_429", "429"),
    ("5.1 429 -> nginx rate/burst", "guide", "g_nginx_limit", "burst"),
    ("5.1 429 -> vLLM queue (corrected)", "guide", "g_queue_long", "max_num_seqs"),
    ("5.1 429 -> token quota", "guide", "g_quota", "budget"),
    ("5.1 500/502/503 -> process alive?", "guide", "err_5xx_alive", "alive"),
    ("5.1 process gone -> OOM kill (dmesg)", "guide", "exit137_who", "dmesg"),
    ("5.1 process alive -> the vLLM log", "guide", "engine_log", "grep"),
    ("5.1 several instances -> load balancer health checks", "guide", "g_lb_health", "health"),
    ("5.1 504 -> TTFB", "guide", "err_504", "TTFB"),
    ("5.1 504 TTFT -> GPU > 95 %", "guide", "ttft_cause", "95 %"),
    ("5.1 504 TTFT -> queue long", "guide", "g_queue_long", "queue"),
    ("5.1 504 TTFT -> prompt too long", "guide", "g_prompt_long", "long prompts"),
    ("5.1 504 TPS -> GPU temperature", "guide", "tps_cause", "throttle"),
    ("5.1 504 TPS -> KV swap (corrected)", "guide", "g_kv_wait", "preempted"),
    ("5.1 connection refused -> port", "guide", "conn_refused", "ss -tlnp"),
    ("5.1 connection refused -> firewall", "guide", "g_conn_blocked", "iptables"),
    ("5.1 connection refused -> model loading", "guide", "g_loading", "Starting vLLM API server"),
    ("5.1 all slow -> GPU utilization", "guide", "slow_all", "nvidia-smi dmon"),
    ("5.1 all slow -> memory swap", "guide", "g_host_swap", "swap"),
    ("5.1 some slow -> long prompt", "guide", "slow_some", "prompt"),
    ("5.1 some slow -> particular users", "guide", "g_user_limited", "rate limit"),
    ("5.1 exit 137", "guide", "exit137_who", "SIGKILL"),
    ("5.1 exit 137 -> container OOM", "guide", "g_container_oom", "limit"),
    ("5.1 exit 137 -> system OOM", "guide", "g_host_oom", "swap"),
    ("5.1 exit 134 SIGABRT", "guide", "exit134", "SIGABRT"),
    ("5.1 exit 134 -> GPU state", "guide", "exit134", "Xid"),
    ("5.1 exit 139 SIGSEGV", "guide", "g_segfault", "segmentation fault"),
    ("5.1 exit 139 -> upgrade, report", "guide", "g_segfault", "upgrade"),
    ("5.2 log keywords", "guide", "engine_log", "OutOfMemory"),
    # Appendix A, row by row
    ("A HTTP 429 Too Many Requests", "rate_limiting", "source", "429"),
    ("A HTTP 500 Internal Server Error", "guide", "engine_log", "log"),
    ("A HTTP 502 Bad Gateway", "guide", "gateway_502", "502"),
    ("A HTTP 503 Service Unavailable", "guide", "q503", "503"),
    ("A HTTP 504 Gateway Timeout", "timeouts", "chain_gateway_short", "504"),
    ("A torch.cuda.OutOfMemoryError", "cuda", "oom_kind", "torch.OutOfMemoryError"),
    ("A CUDA error: out of memory", "cuda", "cuda_oom_restart", "Restart"),
    ("A CUDA error: device-side assert triggered", "cuda", "assert_where", "device-side assert"),
    ("A RuntimeError: NCCL communicator was aborted", "cuda", "nccl_shm_fix", "shm"),
    ("A OSError: No space left on device", "model_loading", "load_error", "No space left on device"),
    ("A ConnectionRefusedError", "guide", "error_code", "ConnectionRefusedError"),
    (
        "A ValueError: max_model_len too large",
        "model_loading",
        "max_len_over_model",
        "max_position_embeddings",
    ),
    ("A OOM Killed (exit code 137)", "guide", "exit137_who", "OOMKilled"),
    ("A SIGABRT (exit code 134)", "guide", "exit134", "abort"),
    ("A KeyError: 'choices'", "guide", "g_client_keyerror", "choices"),
    ("A asyncio.TimeoutError", "timeouts", "chain_client_short", "asyncio.TimeoutError"),
    ("A ssl.SSLError", "guide", "g_client_ssl", "certificate"),
)

# Every section of chapters 2.2 to 2.5, the decision tree and every appendix-A row must be in COVERAGE.
REQUIRED_SECTIONS = (
    *("2.2.1", "2.2.2", "2.2.3", "2.2.4", "2.2.5", "2.3.1", "2.3.2", "2.3.3", "2.3.4", "2.3.5"),
    *("2.4.1", "2.4.2", "2.4.3", "2.4.4", "2.5.1", "2.5.2", "2.5.3", "2.5.4", "2.5.5", "5.1"),
    *("A HTTP 429", "A HTTP 500", "A HTTP 502", "A HTTP 503", "A HTTP 504", "A torch.cuda.OutOfMemoryError"),
    *("A CUDA error: out of memory", "A CUDA error: device-side", "A RuntimeError: NCCL", "A OSError"),
    *("A ConnectionRefusedError", "A ValueError: max_model_len", "A OOM Killed", "A SIGABRT", "A KeyError"),
    *("A asyncio.TimeoutError", "A ssl.SSLError"),
)

NEGATED = r"\b(no|not|never|isn't|aren't|removed|rejects?|gone|without|instead of)\b"
# (what, the wrong claim's pattern, the context that makes a sentence with it right, or None: never)
WRONG_CLAIMS: tuple[tuple[str, str, str | None], ...] = (
    ("--request-timeout as a vLLM flag", r"--request-timeout", NEGATED),
    ("vllm:request_failure_total", r"request_failure_total", NEGATED),
    (
        "gpu_cache_usage_perc as the current KV metric",
        r"gpu_cache_usage_perc",
        r"0\.[78]|renamed|removed|old",
    ),
    (
        "time_per_output_token_seconds as current",
        r"time_per_output_token_seconds",
        r"0\.1[01]|renamed|removed",
    ),
    ("the segment compaction branch", r"segment compaction", None),
    (
        "KV swap as a symptom of the V1 engine",
        r"cpu_cache_usage_perc|num_requests_swapped|swap-space|\bKV swap"
        r"|swap(s|ping)? (the )?KV|swap(s|ped)? to CPU",
        r"0\.7|\bV0\b|" + NEGATED,
    ),
    ("--enable-metrics as a serve flag", r"--enable-metrics", NEGATED),
    ("--max-paddings", r"--max-paddings", NEGATED),
    ("--disable-log-requests as current", r"--disable-log-requests", r"replace|deprecated"),
    ("'Uvicorn running on' as the ready line", r"Uvicorn running", NEGATED),
    ("--local-dir-use-symlinks", r"--local-dir-use-symlinks", r"deprecated|ignored"),
    (
        "lowering gpu_memory_utilization for more KV room",
        r"lower\w*[^.]*gpu.memory.utilization[^.]*(\bmore\b[^.]*\bKV\b|\bKV\b[^.]*\bmore\b)",
        None,
    ),
    ("exit 137 equals OOM", r"\b137\)?\s*(=|means|is)\s*(an? )?(OOM|out of memory)", None),
    ("vLLM sending 429", r"\bvLLM (returns|answers|sends|responds with) (HTTP )?429", NEGATED),
    ("KV cache fragmentation as a cause", r"\bKV\b[^.]*fragment|fragment\w*[^.]*\bKV\b", NEGATED),
    ("scripts that lost their spaces", r'echo"|whiletrue|\bifnot\b|asyncdef|returnawait|kill\$', None),
)

# vllm:* names current versions expose (docs/guide-corrections.md, appendix A.1), without _bucket/_sum/_count.
CURRENT_METRICS = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_requests_waiting_by_reason",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:request_success_total",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_params_n",
    "vllm:iteration_tokens_total",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
}
LEGACY_METRICS = {
    "vllm:gpu_cache_usage_perc",
    "vllm:cpu_cache_usage_perc",
    "vllm:time_per_output_token_seconds",
}


@pytest.fixture(scope="module")
def trees() -> dict[str, Tree]:
    return load()


def node_text(node: Node) -> str:
    parts = [node.question, node.how, node.command, node.metric, node.note, node.cause, node.fix]
    return "\n".join([*parts, *(a.answer for a in node.answers)])


def texts(tree: Tree) -> list[tuple[str, str]]:
    """(where, text) for everything an engineer reads, except the corrections."""
    found = [(f"{tree.id} title", tree.title), (f"{tree.id} summary", tree.summary)]
    return found + [(f"{tree.id}.{node.id}", node_text(node)) for node in tree.nodes.values()]


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?;])\s+|\n", text) if s.strip()]


def wrong_claims(text: str) -> list[str]:
    """The WRONG_CLAIMS a text makes: a sentence with the pattern and without its context."""
    found = []
    for sentence in sentences(text):
        for what, pattern, allowed in WRONG_CLAIMS:
            if re.search(pattern, sentence, re.I) and not (allowed and re.search(allowed, sentence, re.I)):
                found.append(f"{what}: {sentence.strip()!r}")
    return found


def config_links(trees: dict[str, Tree]) -> list[tuple[str, Node]]:
    return [
        (f"{tree.id}.{node.id}", node)
        for tree in trees.values()
        for node in tree.nodes.values()
        if node.config
    ]


def test_the_six_trees_load_and_the_guide_is_for_any_category(trees):
    assert set(trees) == TREE_IDS
    assert trees["guide"].category == "any"
    assert all(tree.category != "any" for tree_id, tree in trees.items() if tree_id != "guide")


def test_the_guide_hands_over_to_every_category_tree(trees):
    targets = {a.goto for node in trees["guide"].nodes.values() for a in node.answers if a.goto}
    targets |= {see for node in trees["guide"].nodes.values() for see in node.see}
    assert targets == TREE_IDS - {"guide"}


def test_every_leaf_names_its_category_and_every_tree_its_corrections(trees):
    for tree in trees.values():
        assert tree.corrections, tree.id
        for node in tree.nodes.values():
            assert not node.is_leaf or node.category, f"{tree.id}.{node.id} has no category"


def test_probe_conditions_sit_on_answers_where_the_probes_can_tell(trees):
    conditions = {
        a.when.removeprefix("not ") for t in trees.values() for n in t.nodes.values() for a in n.answers
    }
    assert {"timeout.ttft", "timeout.tps", "timeout.connect", "reachable", "gpu.thermal"} <= conditions
    assert {
        "rate_limit.http_429",
        "rate_limit.queue",
        "oom.kv_pressure",
        "process.gone",
        "gpu.xid",
    } <= conditions


def test_the_coverage_list_names_every_section_and_appendix_row():
    labels = [section for section, *_ in COVERAGE]
    missing = [s for s in REQUIRED_SECTIONS if not any(label.startswith(s) for label in labels)]
    assert not missing, f"sections without a node: {missing}"


@pytest.mark.parametrize(("section", "tree_id", "node_id", "keyword"), COVERAGE, ids=[c[0] for c in COVERAGE])
def test_each_section_of_the_guide_has_its_node(trees, section, tree_id, node_id, keyword):
    assert node_id in trees[tree_id].nodes, f"{section}: no node {tree_id}.{node_id}"
    assert keyword.lower() in node_text(trees[tree_id].node(node_id)).lower(), f"{section}: {keyword!r}"


def test_every_config_link_renders_with_its_generator(trees):
    links = config_links(trees)
    assert len(links) >= 30
    for where, node in links:
        generator = registry.get(node.config.kind)
        spec = generator.spec(node.config.values, preset=node.config.preset)
        files = generator.render(spec)
        assert files and all(f.content.strip() for f in files), where
        errors = [c.title for c in generator.checks(spec) if c.severity == "error"]
        assert not errors, f"{where}: {errors}"


def test_config_values_are_written_as_strings_in_the_yaml():
    for path in sorted(Path(DATA).glob("*.yaml")):
        for node_id, node in yaml.safe_load(path.read_text(encoding="utf-8"))["nodes"].items():
            values = (node.get("config") or {}).get("set") or {}
            bad = {k: v for k, v in values.items() if not isinstance(v, str)}
            assert not bad, f"{path.name} {node_id}: quote {bad}"


def test_no_text_repeats_a_claim_the_seed_notes_correct(trees):
    found = [
        f"{where}: {claim}"
        for tree in trees.values()
        for where, text in texts(tree)
        for claim in wrong_claims(text)
    ]
    assert not found, "\n".join(found)


def test_the_claim_checker_catches_the_guides_wrong_claims():
    assert wrong_claims("Start vLLM with --request-timeout 120.")
    assert wrong_claims("If vllm:cpu_cache_usage_perc > 0, the engine is swapping.")
    assert wrong_claims("Alert on vllm:gpu_cache_usage_perc above 0.95.")
    assert wrong_claims("Lower gpu_memory_utilization to give the KV cache more room.")
    assert wrong_claims("segment compaction: wait for it to finish")
    assert wrong_claims("After long uptimes the KV cache suffers from fragmentation.")
    assert wrong_claims("Exit code 137 means OOM.")
    assert not wrong_claims("There is no --request-timeout flag in vllm serve.")
    assert not wrong_claims("vLLM 0.7 showed swapping in vllm:cpu_cache_usage_perc.")


def test_metric_names_are_the_current_ones(trees):
    unknown = []
    for tree in trees.values():
        for where, text in texts(tree):
            for sentence in sentences(text):
                for name in re.findall(r"vllm:[a-z0-9_]+", sentence):
                    name = re.sub(r"_(bucket|sum|count)$", "", name)
                    legacy_ok = name in LEGACY_METRICS and re.search(r"0\.[0-9]+|renamed|removed", sentence)
                    if name not in CURRENT_METRICS and not legacy_ok:
                        unknown.append(f"{where}: {name}")
    assert not unknown, unknown


def test_the_corrections_cite_the_seed_notes(trees):
    cited = {
        int(n) for tree in trees.values() for c in tree.corrections for n in re.findall(r"#(\d+)", c.text)
    }
    assert set(range(1, 16)) <= cited


def test_titles_read_the_same_in_html(trees):
    """Pages print the titles HTML-escaped; a title without ' " & < > is found verbatim."""
    for tree in trees.values():
        assert not set("'\"&<>") & set(tree.title), tree.title
