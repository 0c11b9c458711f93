"""When no rule is sure the triage says so: "no category", the lines that look most like a
failure (an exception ending a traceback first, then ERROR lines, then failure words), and
the categories those lines come closest to, as leads rather than a verdict. A bare SIGKILL
stays "killed", with where to look for the sender."""

from __future__ import annotations

from django.core.management import call_command

from diagnostics.triage import engine, unsure
from diagnostics.triage.engine import triage_text

UNKNOWN_FAILURE = """\
INFO 06-02 11:03:18 [api_server.py:1024] vLLM API server version 0.11.0
INFO 06-02 11:03:19 [core.py:167] starting
WARNING 06-02 11:03:20 [utils.py:12] slow tokenizer, consider the fast one
ERROR 06-02 11:03:40 [worker.py:88] worker 3 failed to answer rank 2 over NCCL
Traceback (most recent call last):
  File "/app/run.py", line 10, in main
ValueError: rank 2 sent a tensor of the wrong shape
INFO 06-02 11:03:41 [core.py:200] shutting down
"""


def test_a_log_no_rule_matches_has_no_category_and_shows_its_suspicious_lines():
    result = triage_text(UNKNOWN_FAILURE)
    assert result.category == ""
    lines = result.unsure["lines"]
    assert [line["line"] for line in lines] == [4, 5, 7]
    assert lines[2]["text"] == "ValueError: rank 2 sent a tensor of the wrong shape"


def test_the_closest_candidates_come_from_the_suspicious_lines_words():
    candidates = triage_text(UNKNOWN_FAILURE).unsure["candidates"]
    assert candidates[0] == {"category": "cuda.nccl", "hints": ["nccl"]}


def test_a_clean_log_has_nothing_suspicious():
    assert triage_text("INFO started\nINFO served 10 requests, 0 errors\n").unsure is None


def test_the_heaviest_lines_are_kept_in_line_order():
    text = "".join(f"request {n} failed once\n" for n in range(20)) + "RuntimeError: the real one\n"
    lines = unsure.suspicious_lines(text.encode(), first_line=100)
    assert len(lines) == unsure.KEEP_LINES
    assert lines[-1].text == "RuntimeError: the real one" and lines[-1].line == 120
    assert [s.line for s in lines] == sorted(s.line for s in lines)


def test_only_the_tail_is_kept_and_its_line_numbers_are_the_files():
    # About 510 KB: the tail keeps the last 256 KB, so the first line's error is not among them.
    filler = "RuntimeError: long before the tail\n" + "INFO all is well\n" * 29_999
    result = triage_text(filler + "PermissionError: [Errno 13] Permission denied: '/models'\n")
    assert result.lines == 30_001
    assert result.unsure["lines"] == [
        {"line": 30_001, "text": "PermissionError: [Errno 13] Permission denied: '/models'"}
    ]


def test_the_tail_is_gathered_across_chunks_with_the_files_line_numbers():
    # A log longer than one read: the tail holds lines from both sides of the chunk boundary.
    filler = "INFO all is well\n" * (engine.CHUNK_BYTES // 17 - 100)
    text = filler + "ValueError: before the boundary\n" + "INFO all is well\n" * 200 + "OSError: after it\n"
    result = triage_text(text)
    assert len(filler) < engine.CHUNK_BYTES < len(text)
    lines = [(line["line"], line["text"]) for line in result.unsure["lines"]]
    assert lines == [
        (text.count("\n", 0, text.index("ValueError")) + 1, "ValueError: before the boundary"),
        (result.lines, "OSError: after it"),
    ]


def test_a_bare_sigkill_stays_killed_with_where_to_look():
    result = triage_text("Loading checkpoint shards:  50%|#####     | 1/2\nKilled\n")
    assert result.category == "process.killed"
    assert "dmesg" in result.fix and "OOMKilled" in result.fix


def test_the_cli_prints_no_category_with_lines_and_candidates(tmp_path, capsys):
    log = tmp_path / "run.log"
    log.write_text(UNKNOWN_FAILURE)
    call_command("triage", str(log))
    out = capsys.readouterr().out
    assert "No category: no rule is sure." in out
    assert "       7: ValueError: rank 2 sent a tensor of the wrong shape" in out
    assert "Candidate:  CUDA: NCCL communication error (cuda.nccl; words: nccl)" in out
