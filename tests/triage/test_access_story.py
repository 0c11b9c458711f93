"""The story an nginx access log tells, on generated logs: a 429 spike from one client leads
over a few 502s and names the client and the minutes; upstream 504s lead as gateway timeouts
on their upstream; a clean log says nothing is wrong. Causes rank by the bad responses they
explain, the rule ranking follows the story within a severity, and API keys are masked."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from diagnostics.triage import access_story
from diagnostics.triage.access_log import AccessStats, mask_key
from diagnostics.triage.access_story import describe, span
from diagnostics.triage.engine import triage_text
from tests.triage import access_logs
from tests.triage.access_logs import START, line


def story_of(text: str, **options) -> dict:
    result = triage_text(text, **options)
    assert result.story is not None, "not read as an access log"
    return describe(result.story)


def test_it_headlines_a_429_spike_from_one_ip_and_not_the_502s_before_it():
    result = triage_text(access_logs.rate_limit_spike())
    story = describe(result.story)
    lead, second = story["causes"][0], story["causes"][1]
    assert lead["kind"] == "rate_limit_one_client" and second["kind"] == "bad_gateway"
    assert lead["params"]["who"] == "10.0.3.7" and lead["params"]["who_kind"] == "ip"
    assert (lead["params"]["count"], lead["params"]["total"]) == (500, 570)
    assert (lead["params"]["start"], lead["params"]["end"]) == ("2026-12-03 14:00", "2026-12-03 14:05")
    assert story["headline"] == (
        "Rate limiting (429 spike): 88 % of the 429s came from client 10.0.3.7 between 14:00 and 14:05"
    )
    assert "限流" in story["described"][0]["fix"] and "not a server error" in story["described"][0]["fix"]
    assert story["verdict"] == "bad"


def test_the_rule_verdict_follows_the_story_although_the_502s_come_first():
    result = triage_text(access_logs.rate_limit_spike())
    by_category = {f.category: f for f in result.findings}
    assert by_category["server.5xx"].first_line < by_category["rate_limit.http_429"].first_line
    assert result.category == "rate_limit.http_429"
    assert [f.category for f in result.findings] == ["rate_limit.http_429", "server.5xx"]


def test_the_status_mix_counts_each_class_and_its_share():
    mix = {row["class"]: row for row in story_of(access_logs.rate_limit_spike())["mix"]}
    assert (mix["2xx"]["count"], mix["429"]["count"], mix["5xx"]["count"], mix["4xx"]["count"]) == (
        700,
        570,
        4,
        0,
    )
    assert mix["429"]["share"] == round(570 / 1274, 3)
    assert "3xx" not in mix  # shown only when there are some


def test_the_timeline_has_each_minute_by_status_class():
    timeline = story_of(access_logs.rate_limit_spike())["timeline"]
    assert timeline["2026-12-03 14:02"]["429"] == 100 + 14
    assert timeline["2026-12-03 13:52"]["5xx"] == 4
    assert len(timeline) == 30


def test_it_headlines_upstream_504s_as_gateway_timeouts_on_their_upstream():
    story = story_of(access_logs.upstream_timeouts())
    lead = story["described"][0]
    assert lead["kind"] == "upstream_timeout" and lead["explained"] == 120
    assert story["headline"] == (
        "Gateway timeouts (504): 120 requests timed out waiting for upstream 10.0.1.11:8000 (100 % of them)"
    )
    assert (lead["start"], lead["end"]) == ("14:05", "14:15")
    assert [c["kind"] for c in story["described"]] == ["upstream_timeout", "rate_limit"]


def test_a_json_access_log_tells_the_same_story():
    text = access_logs.upstream_timeouts(fmt="json")
    result = triage_text(text)
    assert result.access["format"] == "json" and "nginx_access" in result.sources
    assert describe(result.story)["headline"] == story_of(access_logs.upstream_timeouts())["headline"]
    assert result.category == "server.5xx"  # the rules read JSON lines too


def test_a_clean_log_says_nothing_is_wrong():
    story = story_of(access_logs.clean())
    assert story["verdict"] == "ok" and story["causes"] == []
    assert story["headline"] == (
        "Nothing wrong: no rate limiting, no server errors and no slow requests in 600 requests"
    )
    assert triage_text(access_logs.clean()).findings == []


def test_without_request_times_a_clean_log_does_not_claim_there_were_no_slow_requests():
    text = "\n".join(line.split(" rt=")[0] for line in access_logs.clean().splitlines())
    assert (
        story_of(text)["headline"] == "Nothing wrong: no rate limiting and no server errors in 600 requests"
    )


def _rows(spec):
    """(minute offset, ip, status, seconds, key) -> log lines."""
    return "\n".join(
        line(ip, START + timedelta(minutes=m, seconds=i % 60), status, rt=rt, key=key)
        for i, (m, ip, status, rt, key) in enumerate(spec)
    )


def test_429s_spread_over_many_clients_are_rate_limiting_but_not_one_clients_spike():
    spec = [(0, f"10.0.4.{i % 8}", 429 if i % 3 else 200, 0.1, "") for i in range(240)]
    story = story_of(_rows(spec))
    assert story["headline"] == "Rate limiting: 160 requests answered 429, from 8 clients"


def test_a_handful_of_429s_is_not_called_a_spike():
    spec = [(0, "10.0.4.1", 200, 0.5, "")] * 50 + [(1, "10.0.4.2", 429, 0.0, "")] * 3
    story = story_of(_rows(spec))
    assert story["described"][0]["kind"] == "rate_limit"
    assert story["headline"] == "Rate limiting: 3 requests answered 429, from 1 client"


def test_one_api_key_behind_many_ips_is_named_by_its_masked_key():
    key = "sk-batchjob0123456789"
    spec = [(i // 40, f"10.0.5.{i % 20}", 429, 0.0, key) for i in range(200)]
    spec += [(i // 40, f"10.0.6.{i % 20}", 200, 0.5, "sk-interactive987654") for i in range(200)]
    result = triage_text(_rows(spec))
    story = describe(result.story)
    assert story["causes"][0]["params"]["who"] == "sk-bat…6789"
    assert "API key sk-bat…6789" in story["headline"]
    assert key not in str(result.access) and key not in str(result.story)  # never the whole key
    assert result.access["top_keys"][0]["key"] in {"sk-bat…6789", "sk-int…7654"}


def test_slow_answered_requests_are_a_cause_with_their_p95():
    spec = [(i // 20, "10.0.4.1", 200, 45.0 if i % 4 == 0 else 2.0, "") for i in range(200)]
    story = story_of(_rows(spec))
    lead = story["described"][0]
    assert lead["kind"] == "slow" and lead["explained"] == 50 and lead["p95"] == 45
    assert story["headline"].startswith("Slow requests: 50 answered requests took 30 s or more")


def test_causes_rank_by_the_bad_responses_they_explain():
    spec = [(0, "10.0.4.1", 200, 1.0, "")] * 100
    spec += [(1, "10.0.4.2", 502, 0.0, "")] * 30 + [(2, "10.0.4.3", 500, 0.1, "")] * 5
    spec += [(3, "10.0.4.4", 429, 0.0, "")] * 12 + [(4, "10.0.4.5", 499, 9.0, "")] * 2
    kinds = [c["kind"] for c in story_of(_rows(spec))["causes"]]
    assert kinds == ["bad_gateway", "rate_limit_one_client", "server_error", "client_gave_up"]


def test_a_fatal_cause_in_the_log_still_ranks_above_the_access_story():
    lines = access_logs.rate_limit_spike().splitlines()
    lines.insert(
        5, "Dec 03 13:50:02 host kernel: Out of memory: Killed process 4242 (python3) total-vm:98765432kB"
    )
    result = triage_text("\n".join(lines))
    assert result.category == "oom.cpu"
    assert result.findings[1].category == "rate_limit.http_429"


def test_the_span_leaves_out_stray_minutes_at_either_end():
    counts = Counter({"13:00": 1, "14:00": 50, "14:01": 60, "14:02": 40, "15:30": 2})
    assert span(counts) == ("14:00", "14:02")
    even = Counter({f"14:{m:02d}": 12 for m in range(10)})
    assert span(even) == ("14:00", "14:09")  # an even spread is not cut
    assert span(Counter({"14:00": 5})) == ("14:00", "14:00")
    assert span(Counter()) == ("", "")


def test_percentages_never_hide_a_few_as_zero():
    assert access_story.percent(0.004) == "< 1 %" and access_story.percent(0) == "0 %"
    assert access_story.percent(0.876) == "88 %"


def test_api_keys_are_masked_as_they_are_read():
    assert mask_key("sk-abcdefghijklmnop") == "sk-abc…mnop"
    assert mask_key("short") == "short" and mask_key("-") == ""
    stats = AccessStats(fields=(False, False, True))
    stats.feed(line("10.0.0.1", START, 200, key="Bearer sk-abcdefghijklmnop").encode() + b"\n")
    assert list(stats.per_key) == ["sk-abc…mnop"]
