"""The probes' findings, verdicts, progress and charts in Simplified Chinese.

Real probes of the simulator with faults injected (a refused port, 429 from a gateway, slow
headers, GPU throttling) and a judged KV-pressure reading are stored the way the worker
stores them, then the instance page, its state block and the probe-run partial are read in
zh-hans: no English is left, the glossary's words are used, the English page is as before,
and a row stored before messages were kept still shows its English evidence.
"""

from __future__ import annotations

import time

import pytest
from django.urls import reverse
from django.utils import timezone, translation

from fleet import charts, probe_service
from fleet.models import InstanceState, MetricSample, ProbeRun, ProbeSettings
from fleet.probes.classify import Thresholds
from fleet.probes.evidence import evidence_html, shown_evidence
from fleet.probes.metric_rules import metric_findings
from fleet.probes.target import ProbeTarget
from fleet.shown_state import state_label
from tests.factories import make_host, make_instance
from tests.fleet.probing import simulated_instances
from tests.zh import assert_speaks_chinese, english_left

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}
FAULTS = {
    "sim-vllm-0": {"kind": "refuse_connections"},
    "sim-vllm-1": {"kind": "rate_limited", "paths": ["/v1"]},
    "sim-vllm-2": {"kind": "slow_headers", "delay_s": 1.5},
    "sim-vllm-3": {"kind": "tps_drop", "factor": 50},
}


def _probe_each(instances) -> dict[str, ProbeRun]:
    """A requested run of every kind for each instance, carried out as the worker does."""
    runs = {}
    for instance in instances:
        run = probe_service.request_probe(instance=instance, requested_by="sre")
        runs[instance.name] = probe_service.run_requested_probe(run_id=run.pk)
    return runs


def _kv_pressure(instance) -> None:
    """The state the worker stores for an engine whose KV cache is full with requests waiting."""
    derived = {"kv_cache_usage": 0.97, "num_requests_waiting": 14, "preemptions_per_s": 0.5}
    target = ProbeTarget(instance_id=instance.pk, name=instance.name, engine="vllm", engine_version="0.11.2",
                         base_url=instance.base_url, served_model_name=instance.served_model_name,
                         api_key=None, max_num_seqs=64, max_model_len=32768)  # fmt: skip
    found = metric_findings(derived, target, Thresholds())
    InstanceState.objects.update_or_create(
        instance=instance,
        defaults={"verdict": "degraded", "last_probe_at": timezone.now(),
                  "findings": [f.to_dict() for f in found]},
    )  # fmt: skip


@pytest.fixture
def probed(simulator):
    settings = ProbeSettings.current()
    settings.read_timeout_s, settings.total_deadline_s, settings.ttfb_s = 2.0, 4.0, 1.0
    settings.save()
    instances = simulated_instances(len(FAULTS) + 1)
    sim = simulator()
    for name, fault in FAULTS.items():
        sim.inject(name, fault)
    time.sleep(1.0)
    runs = _probe_each(instances[: len(FAULTS)])
    _kv_pressure(instances[-1])
    return instances, runs


def _names(instances) -> set[str]:
    return {i.name for i in instances} | {i.host.name for i in instances} | {"Qwen3-8B", "Qwen"}


def _codes(instance) -> set[str]:
    return {f["code"] for f in InstanceState.objects.get(instance=instance).findings}


def test_the_instance_page_state_and_probe_runs_of_every_fault_read_in_chinese(probed, client, cast):
    instances, runs = probed
    client.force_login(cast.engineer)
    assert {"connect.refused"} <= _codes(instances[0]) and {"http.429"} <= _codes(instances[1])
    assert {"ttfb.slow"} <= _codes(instances[2]) and {"gpu.thermal"} <= _codes(instances[3])
    assert {"kv.pressure", "kv.preemptions", "queue.backlog"} <= _codes(instances[4])
    pages = []
    for instance in instances:
        page = client.get(instance.get_absolute_url(), **ZH)
        assert_speaks_chinese(_in_page(page, section="instance-state"), names=_names(instances), where="page")
        for path in (reverse("fleet:instance-state", args=[instance.pk]),
                     reverse("fleet:instance-charts", args=[instance.pk])):  # fmt: skip
            response = client.get(path, **ZH)
            assert_speaks_chinese(_in_page(response), names=_names(instances), where=path)
            pages.append(response.content.decode())
    for run in runs.values():
        path = reverse("fleet:run-status", args=[run.pk])
        response = client.get(path, **ZH)
        assert response.status_code == 286
        assert_speaks_chinese(_in_page(response), names=_names(instances), where=path)
        pages.append(response.content.decode())
    text = "\n".join(pages)
    for said in ("拒绝连接", "限流", "首 token 延迟（TTFT）", "KV Cache 已用", "降频", "本次探测", "状态："):
        assert said in text, said
    assert "降级" in text and "宕机" in text or "失败中" in text


def _in_page(response, *, section: str = ""):
    """A partial (or one section of a page) wrapped as a zh-hans page, for
    tests.zh.assert_speaks_chinese; the rest of the page is other areas' work."""
    assert response.status_code in (200, 286), response.status_code
    body = response.content.decode()
    if section:
        assert '<html lang="zh-hans"' in body
        start = body.index(f'<section id="{section}"')
        body = body[start : body.index("</section>", start) + len("</section>")]
    response.content = f'<html lang="zh-hans"><body>{body}</body></html>'.encode()
    response.status_code = 200
    return response


def test_the_english_page_is_as_before(probed, client, cast):
    instances, runs = probed
    client.force_login(cast.viewer)
    refused = client.get(reverse("fleet:instance-state", args=[instances[0].pk]), **EN).content.decode()
    assert "Connection refused on" in refused and "nothing listens on the port" in refused
    assert "State:" in refused and "正常" not in refused
    limited = InstanceState.objects.get(instance=instances[1]).findings
    http_429 = next(f for f in limited if f["code"] == "http.429")
    assert "vLLM itself never answers 429" in http_429["evidence"]  # the API's English text
    assert http_429["evidence_message"]["msgid"]
    with translation.override("en"):
        assert shown_evidence(http_429) == http_429["evidence"]
    run = client.get(reverse("fleet:run-status", args=[runs["sim-vllm-2"].pk]), **EN).content.decode()
    assert "This probe:" in run and "finished in" in run


def test_an_old_row_with_only_english_evidence_still_shows(client, cast):
    instance = make_instance(make_host())
    old = {"code": "x", "category": "timeout.ttft", "severity": "degraded", "evidence": "TTFB 7.2 s > 5 s"}
    InstanceState.objects.create(instance=instance, verdict="degraded", last_probe_at=timezone.now(),
                                 findings=[old])  # fmt: skip
    client.force_login(cast.viewer)
    page = client.get(reverse("fleet:instance-state", args=[instance.pk]), **ZH).content.decode()
    assert "TTFB 7.2 s &gt; 5 s" in page and "降级" in page
    with translation.override("zh-hans"):
        assert shown_evidence(old) == "TTFB 7.2 s > 5 s"
        assert evidence_html(old) == "TTFB 7.2 s &gt; 5 s"


def test_findings_show_in_the_active_language_for_other_pages():
    derived = {"num_requests_waiting": 12}
    target = ProbeTarget(instance_id=1, name="a", engine="vllm", engine_version="", base_url="http://x",
                         served_model_name="m", api_key=None, max_num_seqs=64,
                         max_model_len=1024)  # fmt: skip
    (finding,) = metric_findings(derived, target, Thresholds())
    stored = finding.to_dict()
    assert stored["evidence"] == "12 requests waiting > 10, so a backlog"
    with translation.override("zh-hans"):
        assert shown_evidence(stored) == "12 个请求在等待 > 10，等待队列积压"
        assert shown_evidence(finding) == shown_evidence(stored)
        assert state_label("stale") == "过期" and state_label("down") == "宕机"
    with translation.override("en"):
        assert shown_evidence(stored) == stored["evidence"]


def test_raw_values_stay_as_they_came_in_code():
    stored = {
        "evidence": "x",
        "evidence_message": {
            "msgid": "%(path)s: %(error)s",
            "params": {"path": "/health", "error": "<b>ReadTimeout</b>"},
        },
    }
    with translation.override("zh-hans"):
        html = evidence_html(stored)
    assert html == (
        '<code translate="no">/health</code>：<code translate="no">&lt;b&gt;ReadTimeout&lt;/b&gt;</code>'
    )


def test_chart_titles_axes_and_legends_are_chinese():
    instance = make_instance(make_host())
    now = timezone.now()
    MetricSample.objects.bulk_create(
        [
            MetricSample(instance=instance, name=name, ts=now - timezone.timedelta(minutes=m), value=0.5)
            for m in range(3)
            for name in ("ttft_p95_s", "num_requests_running", "kv_cache_usage", "gpu_temperature_c")
        ]
    )
    phases = {"dns_s": 0.0, "connect_s": 0.01, "ttfb_s": 0.5, "total_s": 0.6}
    with translation.override("zh-hans"):
        panels = charts.instance_panels(instance=instance, since=now - timezone.timedelta(hours=1))
        breakdown = charts.phase_breakdown(phases)
        titles = [str(panel["title"]) for panel in panels]  # lazy: read as the page reads them
    shown = list(titles)
    for panel in panels:
        layout = panel["figure"]["layout"]
        shown += [layout["yaxis"]["title"]["text"], layout["xaxis"]["title"]["text"]]
        shown += [trace["name"] for trace in panel["figure"]["data"]]
    shown += [trace["name"] for trace in breakdown["data"]] + breakdown["data"][0]["y"]
    shown.append(breakdown["layout"]["xaxis"]["title"]["text"])
    html = "".join(f"<p>{text}</p>" for text in shown)
    assert not english_left(html), english_left(html)
    assert "首 token 延迟（TTFT）" in shown and "运行中" in shown and "最近一次探测" in shown
    with translation.override("en"):
        english = charts.instance_panels(instance=instance, since=now - timezone.timedelta(hours=1))
        assert str(english[0]["title"]) == "Time to first token"
    assert english[0]["figure"]["layout"]["yaxis"]["title"]["text"] == "seconds (s)"
    assert "running" in [trace["name"] for panel in english for trace in panel["figure"]["data"]]


def test_the_progress_of_a_running_and_an_abandoned_run_reads_in_chinese(client, cast):
    instance = make_instance(make_host())
    progress = {"health": {"outcome": "read_timeout", "error": "ReadTimeout", "elapsed_s": 2.0},
                "stream": None, "metrics": {"outcome": "ok", "error": "", "elapsed_s": 0.1}}  # fmt: skip
    running = ProbeRun.objects.create(instance=instance, status="running", result={"progress": progress})
    pending = ProbeRun.objects.create(instance=instance, status="pending")
    ProbeRun.objects.filter(pk=pending.pk).update(started_at=timezone.now() - timezone.timedelta(hours=1))
    client.force_login(cast.viewer)
    names = {instance.name, instance.host.name}
    first = client.get(reverse("fleet:run-status", args=[running.pk]), **ZH)
    assert_speaks_chinese(_in_page(first), names=names, where="running run")
    text = first.content.decode()
    assert "正在探测" in text and "秒，最多" in text and "等待应答超时" in text and "运行中…" in text
    late = client.get(reverse("fleet:run-status", args=[pending.pk]), **ZH)
    assert_speaks_chinese(_in_page(late), names=names, where="abandoned run")
    assert "Celery 工作进程" in late.content.decode()
