"""Logs that are not plain lines read as well as vLLM's: TGI's JSON logs, Docker's json-file
logs and colour-coded Ray/SGLang output are turned into plain lines (one per line, so line
numbers stay the file's) before the rules read them; the sources name the programs."""

from __future__ import annotations

import json

from diagnostics.triage import line_formats, sources
from diagnostics.triage.engine import triage_text


def tgi(level: str, message: str) -> str:
    return json.dumps(
        {"timestamp": "2024-05-01T10:00:00Z", "level": level, "fields": {"message": message},
         "target": "text_generation_launcher"}
    )  # fmt: skip


TGI_JSON = "\n".join(
    [
        tgi("INFO", "Starting shard rank=0"),
        tgi(
            "ERROR",
            'Shard complete standard error output:\n\nTraceback (most recent call last):\n  File "/opt/'
            'server.py", line 3, in load_weights\ntorch.cuda.OutOfMemoryError: CUDA out of memory. '
            "Tried to allocate 1.00 GiB",
        ),
        tgi("ERROR", "Shard 0 failed to start"),
    ]
)


def test_tgi_json_logs_read_like_its_plain_logs():
    result = triage_text(TGI_JSON + "\n")
    assert result.category == "model_loading.not_enough_memory"
    assert result.lines == 3
    assert result.primary.rules[0].examples[0].line in (2, 3)
    assert "tgi" in result.sources


def test_a_json_message_becomes_level_and_text_with_its_newlines_marked():
    unwrap = line_formats.unwrapper((TGI_JSON + "\n").encode())
    lines = unwrap((TGI_JSON + "\n").encode()).decode().splitlines()
    assert lines[0] == "INFO Starting shard rank=0"
    assert lines[1].startswith("ERROR Shard complete standard error output: \u23ce  \u23ce Traceback")
    assert len(lines) == 3


def test_docker_json_file_logs_lose_their_wrapping():
    log = "\n".join(
        json.dumps({"log": text, "stream": "stderr", "time": "2024-05-01T10:00:00Z"}, separators=(",", ":"))
        for text in ("Loading checkpoint shards: 1/2\n", "Killed\n")
    )
    result = triage_text(log + "\n")
    assert result.category == "process.killed"
    assert "docker" in result.sources


def test_an_nginx_json_access_log_is_left_to_the_access_log_reader():
    line = '{"remote_addr":"10.0.0.7","request":"POST /v1/chat/completions HTTP/1.1","status":"429"}'
    assert not line_formats.is_json_lines(((line + "\n") * 5).encode())
    assert triage_text((line + "\n") * 5).category == "rate_limit.http_429"


def test_colour_codes_from_ray_and_sglang_are_removed():
    raw = "\x1b[36m(raylet)\x1b[0m node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory"
    copied = "^[[36m(raylet)^[[0m node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory"
    for text in (raw, copied):
        result = triage_text(text + " pressure (OOM), 0 Workers crashed due to other reasons\n")
        assert result.category == "oom.cpu"
        assert result.matches()[0].text.startswith("(raylet) node_manager.cc")


def test_lines_that_are_not_json_pass_unchanged_in_a_json_log():
    log = (TGI_JSON + "\nSegmentation fault (core dumped)\n").encode()
    unwrap = line_formats.unwrapper(log)
    assert unwrap(log).decode().splitlines()[-1] == "Segmentation fault (core dumped)"


def test_the_sources_name_the_engines_beyond_vllm():
    heads = {
        "sglang": "[2025-01-14 08:56:40 TP0] Decode batch. #running-req: 12, #queue-req: 0",
        "ray": "(raylet) node_manager.cc:3069: 1 Workers killed",
        "llama.cpp": "llama_model_load: loaded meta data with 30 key-value pairs",
        "triton": "I0310 06:25:38.962361 1 grpc_server.cc:2519] Started GRPCInferenceService; tritonserver",
        "trtllm": "[TensorRT-LLM][INFO] Loaded engine size: 13768 MiB",
        "systemd": "vllm.service: Main process exited, code=exited, status=1/FAILURE",
    }
    for name, head in heads.items():
        assert name in sources.detect(head.encode()), name


def test_a_lone_surrogate_in_a_json_message_is_kept_as_an_invalid_byte_not_raised():
    lines = b'{"level": "error", "msg": "bad \\ud800 char"}\n' * 6
    assert line_formats.unwrapper(lines)(lines).split(b"\n")[0] == b"ERROR bad \xed\xa0\x80 char"
    assert triage_text(lines).lines == 6
