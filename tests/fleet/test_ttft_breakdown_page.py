"""The instance page splits the stream probe's TTFT into its parts, from the results the
probes stored (InstanceState.kinds, as the worker writes them), names the largest part
beside a TTFT finding, and reads in English and in Simplified Chinese."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from core.i18n import later
from fleet.models import InstanceState
from fleet.probes.findings import Category, Finding
from tests.factories import make_gateway, make_host, make_instance
from tests.zh import english_left

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}

# As the worker stores them (PhaseResult.to_dict, StreamResult.to_dict).
PHASES = {
    "url": "http://10.0.0.9:8000/v1/chat/completions",
    "method": "POST",
    "outcome": "ok",
    "status": 200,
    "dns_s": 0.0,
    "connect_s": 0.003,
    "tls_s": None,
    "ttfb_s": 5.9,
    "total_s": 5.95,
}
STREAM = {"outcome": "ok", "ttft_s": 6.1, "total_s": 6.4, "prompt_tokens": 14, "completion_tokens": 16}
DERIVED = {
    "window_s": 30.0,
    "queue_time_mean_s": 4.8,
    "queue_time_p50_s": 4.5,
    "prefill_time_mean_s": 1.1,
    "prompt_length_mean": 4000.0,
    "prefix_cache_queries_per_s": 1000.0,
    "prefix_cache_hits_per_s": 200.0,
}


def ttft_finding(seconds: float = 6.1) -> dict:
    """A TTFT finding as the stream rules store it."""
    evidence = later("TTFT %(s).1f s > %(limit)g s in the stream probe, so TTFT", s=seconds, limit=5)
    return Finding(code="ttft.slow", category=Category.TTFT, severity="degraded", source="stream",
                   evidence=evidence).to_dict()  # fmt: skip


def probed(
    instance, *, derived=DERIVED, stream=STREAM, phases=PHASES, ago=timedelta(seconds=20), findings=()
):
    """The state the worker stores after a health, a stream and a metrics probe."""
    at = (timezone.now() - ago).isoformat()
    InstanceState.objects.create(
        instance=instance,
        verdict="degraded" if findings else "up",
        last_probe_at=timezone.now() - ago,
        findings=list(findings),
        kinds={
            "health": {"at": at, "result": {"readiness": None, "phases": phases}},
            "stream": {"at": at, "result": {"stream": stream}},
            "metrics": {"at": at, "result": {"scrape_result": None, "derived": derived}},
        },
    )
    return instance


def section(page: str) -> str:
    found = re.search(r'<section class="card" id="ttft-breakdown".*?</section>', page, re.S)
    assert found, "no TTFT breakdown on the page"
    return found.group(0)


def row(html: str, part: str) -> str:
    found = re.search(rf'<tr data-part="{part}".*?</tr>', html, re.S)
    assert found, part
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(0)).split())


def test_the_instance_page_splits_the_ttft_and_names_the_largest_part(viewer_client):
    instance = probed(make_instance(make_host()))
    html = section(viewer_client.get(instance.get_absolute_url(), **EN).content.decode())
    assert "TTFT 6.1 s: 4.8 s queued (waiting for capacity), 1.1 s prefill" in html
    assert 'data-cause="queue"' in html
    assert row(html, "queue").startswith(
        "queue 4.8 s 79 % the engine&#x27;s mean queue time over the last 30 s"
    )
    prefill = row(html, "prefill")
    assert "1.1 s 18 %" in prefill
    assert "~3200 computed and ~800 read from the prefix cache (20% hit rate)" in prefill
    assert row(html, "connect").startswith("connect (DNS and TCP) 0.003 s 0 %")
    assert "plain HTTP: no TLS" in row(html, "tls") and "not applicable" in row(html, "tls")
    assert "no gateway in front of this instance" in row(html, "gateway")
    assert "0.2 s 3 %" in row(html, "other")
    # The bar repeats the table; the sentence is the text everyone reads.
    assert html.count("<rect x=") == 4 and 'aria-hidden="true"' in html
    assert "The TTFT is one stream probe" in html and "averages over its last metrics window" in html


def test_missing_engine_figures_are_parts_not_measured(viewer_client):
    derived = {"window_s": 30.0, "queue_time_mean_s": 0.2}  # an engine without the prefill histogram
    instance = probed(make_instance(make_host()), derived=derived, stream={**STREAM, "ttft_s": 2.0})
    html = section(viewer_client.get(instance.get_absolute_url(), **EN).content.decode())
    assert "not measured" in row(html, "prefill") and "no prefill-time histogram" in row(html, "prefill")
    assert "TTFT 2 s: 1.8 s not explained by the measured parts" in html
    assert "; not measured: prefill" in html


def test_a_gateway_not_yet_timed_is_named_as_not_measured(viewer_client):
    instance = probed(make_instance(make_host(), base_url="http://10.0.0.9:8000"))
    make_gateway(name="edge-gw", url="https://llm.example.com", instances=[instance])
    gateway = row(section(viewer_client.get(instance.get_absolute_url()).content.decode()), "gateway")
    assert "not measured" in gateway and "not timed through edge-gw yet" in gateway


def test_the_gateway_gap_is_the_ttfb_through_the_gateway_minus_the_direct_one(viewer_client):
    instance = make_instance(make_host(), base_url="http://10.0.0.9:8000")
    make_gateway(name="edge-gw", url="https://llm.example.com", instances=[instance])
    probed(instance)
    state = InstanceState.objects.get(instance=instance)
    through = {**PHASES, "url": "https://llm.example.com/v1/chat/completions", "ttfb_s": 6.6}
    state.kinds["health"]["result"]["gateway_phases"] = through
    state.save()
    gateway = row(section(viewer_client.get(instance.get_absolute_url(), **EN).content.decode()), "gateway")
    assert gateway.startswith("gateway gap 0.7 s")
    assert "TTFB 6.6 s through edge-gw − 5.9 s straight to the engine" in gateway


def test_a_gateway_that_did_not_answer_says_why(viewer_client):
    instance = make_instance(make_host(), base_url="http://10.0.0.9:8000")
    make_gateway(name="edge-gw", url="https://llm.example.com", instances=[instance])
    probed(instance)
    state = InstanceState.objects.get(instance=instance)
    failed = {**PHASES, "outcome": "refused", "status": None, "ttfb_s": None, "error": "connection refused"}
    state.kinds["health"]["result"]["gateway_phases"] = failed
    state.save()
    gateway = row(section(viewer_client.get(instance.get_absolute_url(), **EN).content.decode()), "gateway")
    assert "not measured" in gateway and "through edge-gw got no answer: connection refused" in gateway


def test_probes_through_the_gateway_have_no_direct_ttfb_to_compare(viewer_client):
    instance = probed(make_instance(make_host(), base_url="https://llm.example.com"))
    make_gateway(name="edge-gw", url="https://llm.example.com/", instances=[instance])
    gateway = row(section(viewer_client.get(instance.get_absolute_url()).content.decode()), "gateway")
    assert "only through edge-gw: no direct TTFB to compare" in gateway


def test_no_probe_results_or_stale_ones_show_no_breakdown(viewer_client):
    never = make_instance(make_host())
    assert 'id="ttft-breakdown"' not in viewer_client.get(never.get_absolute_url()).content.decode()
    stale = probed(make_instance(make_host()), ago=timedelta(hours=2))
    assert 'id="ttft-breakdown"' not in viewer_client.get(stale.get_absolute_url()).content.decode()


def test_rows_written_by_another_console_leave_the_page_standing(viewer_client):
    instance = make_instance(make_host())
    now = timezone.now().isoformat()
    InstanceState.objects.create(
        instance=instance,
        verdict="up",
        kinds={
            "health": {"at": now, "result": "junk"},
            "stream": {"at": now, "result": {"stream": "junk"}},
            "metrics": {"at": now, "result": {"derived": [1]}},
        },
    )
    response = viewer_client.get(instance.get_absolute_url())
    assert response.status_code == 200 and 'id="ttft-breakdown"' not in response.content.decode()


def test_the_breakdown_reads_in_simplified_chinese(viewer_client):
    instance = probed(make_instance(make_host()), findings=[ttft_finding()])
    response = viewer_client.get(instance.get_absolute_url(), **ZH)
    page = response.content.decode()
    assert '<html lang="zh-hans"' in page
    html = section(page)
    assert "TTFT 6.1 秒：排队 4.8 秒（等待容量）、预填充 1.1 秒" in html
    assert "TTFT 都花在哪里" in html and "未测到" not in html and "不适用" in html
    left = english_left(html, names={"TTFT", "TLS", "DNS", "TCP", "HTTP", "KV"})
    assert not left, "\n".join(left)
    english = section(viewer_client.get(instance.get_absolute_url(), **EN).content.decode())
    assert "TTFT 6.1 s: 4.8 s queued (waiting for capacity), 1.1 s prefill" in english
