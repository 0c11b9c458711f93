"""The triage engine: one pass over chunks with line numbers and context that survive chunk
boundaries, a ranking that puts the first fatal cause first, exit codes explained, gzip
read through, input it cannot read refused clearly, and nginx access logs counted per
client IP and window (on the simulator's own access log)."""

import gzip
import io
import time

import httpx
import pytest

from diagnostics.triage import engine
from diagnostics.triage.rules import parse
from fleet.simulator.spec import InstanceSpec

RULES = parse(
    [
        {"id": "oom_kill", "category": "oom.cpu", "severity": "fatal",
         "patterns": ["Out of memory: Killed process"], "root_cause": "The kernel's OOM killer.",
         "fix": "More RAM."},
        {"id": "upstream_timeout", "category": "timeout.ttft", "severity": "symptom",
         "patterns": ["upstream timed out"], "root_cause": "Slow upstream.", "fix": "Wait."},
        {"id": "bad_gateway", "category": "server.5xx", "severity": "symptom", "patterns": [r'" 502 '],
         "root_cause": "No upstream.", "fix": "Start it."},
        {"id": "cuda_oom", "category": "oom.gpu", "severity": "fatal", "patterns": ["(?i)cuda out of memory"],
         "unless": ["test_cuda_out_of_memory"], "root_cause": "GPU memory.", "fix": "Less batch."},
    ]
)  # fmt: skip

CASCADE = """\
Dec 03 03:00:01 host vllm[1]: INFO request served
Dec 03 03:00:02 host kernel: Out of memory: Killed process 4242 (python3) total-vm:98765432kB
2026/12/03 03:00:05 [error] 12#12: *9 upstream timed out (110: Connection timed out) while reading
10.0.3.12 - - [03/Dec/2026:03:00:06 +0000] "POST /v1/chat/completions HTTP/1.1" 502 157 "-" "py"
2026/12/03 03:00:07 [error] 12#12: *10 upstream timed out (110: Connection timed out) while reading
"""


def triage(text, **options):
    return engine.triage_text(text, rules=RULES, **options)


def test_the_first_fatal_cause_ranks_above_its_consequences():
    result = triage(CASCADE)
    assert result.category == "oom.cpu" and result.root_cause == "The kernel's OOM killer."
    assert [f["category"] for f in result.to_dict()["secondary"]] == ["timeout.ttft", "server.5xx"]
    timeouts = result.findings[1]
    assert timeouts.first_line == 3 and timeouts.count == 2


def test_matches_carry_their_line_number_and_a_few_lines_around_them():
    match = triage(CASCADE).matches()[0]
    assert match.line == 2 and match.text.startswith("Dec 03 03:00:02 host kernel: Out of memory")
    assert match.before == ["Dec 03 03:00:01 host vllm[1]: INFO request served"]
    assert match.after[0].startswith("2026/12/03 03:00:05 [error]")


def test_line_numbers_stay_right_across_chunk_boundaries(monkeypatch):
    monkeypatch.setattr(engine, "CHUNK_BYTES", 37)
    text = "".join(f"line {i}\n" for i in range(1, 500)) + "CUDA out of memory here\n" + "tail\n" * 3
    result = triage(text)
    assert result.matches()[0].line == 500 and result.lines == 503


def test_a_veto_pattern_keeps_a_rule_from_misfiring():
    assert triage("PASSED tests/test_cuda_out_of_memory.py\n").category == ""


def test_exit_codes_are_explained_and_137_is_not_called_an_oom():
    result = triage("Last State: Terminated\n  Exit Code: 137\nexited with code 139\n")
    codes = {c["code"]: c["meaning"] for c in result.exit_codes}
    assert "SIGKILL" in codes[137] and "Not proof of an OOM" in codes[137]
    assert "SIGSEGV" in codes[139]


def test_gzip_is_read_through_and_unreadable_input_refused():
    packed = gzip.compress(CASCADE.encode())
    assert engine.triage_stream(io.BufferedReader(io.BytesIO(packed)), rules=RULES).category == "oom.cpu"
    with pytest.raises(engine.TriageInputError, match="UTF-16"):
        triage("\ufeffhello".encode("utf-16"))
    with pytest.raises(engine.TriageInputError, match="NUL"):
        triage(b"\x7fELF\x00\x00\x00")
    with pytest.raises(engine.TriageInputError, match="over 10 bytes"):
        triage(CASCADE, max_bytes=10)


def test_a_huge_line_is_cut_rather_than_held(monkeypatch):
    monkeypatch.setattr(engine, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(engine, "MAX_LINE_BYTES", 2048)
    result = triage("x" * 100_000 + "\nCUDA out of memory\n")
    assert result.category == "oom.gpu"


def test_progress_is_reported_as_the_log_is_read(monkeypatch):
    monkeypatch.setattr(engine, "CHUNK_BYTES", 64)
    seen = []
    triage(CASCADE, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == len(CASCADE.encode())


def test_the_guides_second_case_two_client_ips_behind_a_spike(simulate):
    # The simulator's access log, in nginx's combined format, with a surge from two batch IPs.
    sim = simulate(InstanceSpec(name="target", version="0.11.2", max_model_len=8192))
    surge = {
        "stream": "batch",
        "requests_per_s": 30,
        "mean_output_tokens": 4,
        "clients": ["10.0.2.55", "10.0.2.56"],
    }
    httpx.post(sim.url("target") + "/_sim/load", json=surge)
    deadline = time.monotonic() + 20
    while (
        time.monotonic() < deadline
        and httpx.get(sim.url("target") + "/_sim/access_log").text.count("\n") < 40
    ):
        time.sleep(0.2)
    log = httpx.get(sim.url("target") + "/_sim/access_log", params={"limit": 1000}).text
    access = engine.triage_text(log).access
    assert access is not None and access["lines"] >= 40
    talkers = {t["ip"] for t in access["top_talkers"][:2]}
    assert talkers == {"10.0.2.55", "10.0.2.56"}
    assert sum(t["share"] for t in access["top_talkers"][:2]) > 0.9
    assert access["busiest"][0]["ip"] in talkers and access["per_window"]


def test_access_logs_are_counted_per_ip_and_window_with_429s_and_5xx():
    request = '"POST /v1/chat/completions HTTP/1.1"'
    lines = [
        f'10.0.2.55 - - [03/Dec/2026:14:0{m}:{s:02d} +0800] {request} {code} 9 "-" "x"'
        for m, s, code in [(0, 1, 200), (0, 2, 429), (1, 3, 429), (1, 4, 503), (2, 5, 200)]
    ]
    lines.append('10.0.3.12 - - [03/Dec/2026:14:01:09 +0800] "GET /v1/models HTTP/1.1" 200 9 "-" "x"')
    access = engine.triage_text("\n".join(lines), window_minutes=2).access
    assert access["per_window"] == {
        "2026-12-03 14:00": {"requests": 5, "429": 2, "5xx": 1},
        "2026-12-03 14:02": {"requests": 1, "429": 0, "5xx": 0},
    }
    assert access["top_talkers"][0] == {"ip": "10.0.2.55", "requests": 5, "429": 2, "5xx": 1, "share": 0.833}


COMBINED = parse(
    [
        {"id": "cuda_oom", "category": "oom.gpu", "severity": "fatal", "patterns": ["CUDA out of memory"],
         "root_cause": "GPU memory.", "fix": "Less batch."},
        {"id": "oom_at_load", "category": "model_loading.not_enough_memory", "severity": "fatal",
         "when": ["oom.gpu"], "patterns": [", in load_model"], "root_cause": "Too big to load.",
         "fix": "Quantize."},
    ]
)  # fmt: skip


def test_a_combination_takes_in_the_finding_it_names_and_speaks_first():
    text = '  File "loader.py", line 406, in load_model\ntorch.OutOfMemoryError: CUDA out of memory.\n'
    result = engine.triage_text(text, rules=COMBINED)
    assert [f.category for f in result.findings] == ["model_loading.not_enough_memory"]
    assert [h.rule.id for h in result.primary.rules] == ["oom_at_load", "cuda_oom"]
    assert result.root_cause == "Too big to load."


def test_a_combination_without_its_partner_finds_nothing_and_leaves_the_partner_alone():
    lonely = engine.triage_text('  File "loader.py", line 406, in load_model\n', rules=COMBINED)
    assert lonely.findings == []
    serving = engine.triage_text("torch.OutOfMemoryError: CUDA out of memory.\n", rules=COMBINED)
    assert serving.category == "oom.gpu"


def test_a_combination_names_taxonomy_categories():
    with pytest.raises(ValueError, match="'when' must be a list of taxonomy categories"):
        parse([{**COMBINED_RAW, "when": ["oom.gpuu"]}])


COMBINED_RAW = {"id": "x", "category": "oom.gpu", "severity": "fatal", "patterns": ["x"],
                "root_cause": "x", "fix": "x"}  # fmt: skip
