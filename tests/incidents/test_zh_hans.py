"""Incidents, review, drills and notifications in Simplified Chinese: incidents opened by the
alert engine from the probes' findings, acknowledged, resolved with a root cause, with the
timeline the engine and people wrote; the review with its figures; a drill run's report; all
read in zh-hans with no English left outside names and identifiers, while the English pages
say what they said before. Text written by the engine is stored as messages, so it reads in
the language of whoever opens it; notifications are in NOTIFICATION_LANGUAGE."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone, translation

from fleet.models import InstanceState, MetricSample
from fleet.simulator.scenarios import load_scenario
from incidents import delivery, lifecycle, people_format
from incidents.alerting import evaluate
from incidents.drills.checks import check
from incidents.drills.descriptions import DESCRIPTIONS
from incidents.drills.observed import Observation, incidents_seen, scenario_clock
from incidents.drills.run import DrillReport
from incidents.drills.service import shipped
from incidents.forms import IncidentForm
from incidents.models import DrillRun, Incident, NotificationDelivery, NotificationTarget, TimelineEntry
from incidents.postmortem import postmortem
from incidents.stats import ReviewFilters, load_records, review_figures
from incidents.views.pages import _shown
from incidents.views.review import _charts
from tests.factories import make_host, make_instance
from tests.zh import assert_speaks_chinese

pytestmark = pytest.mark.django_db
ZH = "zh-CN,zh;q=0.9,en;q=0.5"
T0 = datetime(2026, 11, 20, 3, 0, tzinfo=UTC)
REFUSED = {
    "code": "connect.refused", "category": "process.not_started", "severity": "down",
    "evidence": "connect.refused", "source": "readiness",
}  # fmt: skip
KV_PRESSURE = {
    "code": "kv.pressure", "category": "oom.kv_pressure", "severity": "degraded",
    "evidence": "kv.pressure", "source": "metrics",
}  # fmt: skip
TARGET = "oncall-hook"


def judged(instance, verdict, *findings):
    InstanceState.objects.update_or_create(
        instance=instance, defaults={"verdict": verdict, "findings": list(findings)}
    )


def evaluate_every_30_s(start, steps, each=lambda at: None):
    for i in range(steps):
        at = start + timedelta(seconds=30 * i)
        each(at)
        evaluate(now=at)
    return start + timedelta(seconds=30 * (steps - 1))


@pytest.fixture
def story(cast):
    """Two incidents the alert engine opened: chat-a refused connections (Service down, then
    back up: mitigated, acknowledged, resolved with a root cause by an edit, notified), chat-b
    had KV pressure (open, not acknowledged)."""
    host = make_host(name="rack-a")
    chat_a, chat_b = make_instance(host, name="chat-a"), make_instance(host, name="chat-b")
    judged(chat_a, "down", REFUSED)
    judged(chat_b, "up")
    at = evaluate_every_30_s(T0, 4)  # Service down: 60 s
    down = Incident.objects.get(category="process.not_started")
    lifecycle.acknowledge(down, at=at + timedelta(minutes=2), user=cast.sre.username)
    judged(chat_a, "up")
    at = evaluate_every_30_s(at + timedelta(minutes=5), 2)

    def pressure(moment):
        MetricSample.objects.create(instance=chat_b, name="kv_cache_usage", value=0.97, ts=moment)
        judged(chat_b, "degraded", KV_PRESSURE)

    evaluate_every_30_s(at + timedelta(minutes=1), 6, pressure)

    down.refresh_from_db()
    fields = {name: getattr(down, name) for name in Incident.EDITABLE_FIELDS}
    fields |= {
        "status": "resolved",
        "resolved_at": (at + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M"),
        "root_cause": "显存碎片导致 vLLM 启动失败，进程未监听端口。",
        "resolution": "重启实例并调低 gpu_memory_utilization。",
        "owner": cast.sre.pk,
        "hosts": [host.pk],
        "instances": [chat_a.pk],
    }
    for name in ("started_at", "detected_at", "acknowledged_at"):
        fields[name] = fields[name].strftime("%Y-%m-%dT%H:%M")
    form = IncidentForm(fields, instance=down)
    assert form.is_valid(), form.errors
    lifecycle.edit_by_hand(form=form, at=at + timedelta(minutes=30), author=cast.sre.username, shown=_shown)
    TimelineEntry.objects.create(
        incident=down, kind="note", text="已确认是显存碎片。", author=cast.sre.username
    )
    target = NotificationTarget.objects.create(
        name=TARGET, url="http://127.0.0.1:9/hook", min_severity="minor"
    )
    sent = NotificationDelivery.objects.create(target=target, incident=down, event="opened", attempts=1)
    delivery._record(sent, delivery.Response(200, ""))
    kv = Incident.objects.get(category="oom.kv_pressure")
    return {"down": Incident.objects.get(pk=down.pk), "kv": kv, "host": host, "instances": [chat_a, chat_b]}


def names(cast):
    users = {u.username for u in (cast.viewer, cast.engineer, cast.sre, cast.admin, cast.outsider)}
    return users | {"rack-a", "chat-a", "chat-b", "Qwen/Qwen3-8B", TARGET}


def test_the_engine_keeps_what_it_writes_as_messages_and_english_beside_them(story):
    down = story["down"]
    assert down.title == "Service down on chat-a: Process: not started or not listening"
    assert down.title_message["msgid"] == "%(rule)s on %(instance)s: %(category)s"
    opened = down.timeline.get(kind="opened")
    assert opened.text == (
        "Service down fired on chat-a: service_down = 1 (> 0.5 for 60 s); "
        "cause: Process: not started or not listening."
    )
    with translation.override("zh-hans"):
        assert down.shown_title.startswith("chat-a：")
        assert "在 chat-a 上触发" in opened.shown_text and "原因：" in opened.shown_text
        restart = down.timeline.get(kind="restart").shown_text
        assert restart == "chat-a：宕机 → 正常（已恢复：重启过）"
        edits = [e.shown_text for e in down.timeline.filter(kind="edit")]
        assert "状态：已缓解 → 已解决" in edits
        assert down.timeline.get(kind="notification").shown_text == f"已通知 {TARGET}（开启）。"
    assert "Status: mitigated → resolved" in [e.text for e in down.timeline.filter(kind="edit")]


def test_the_incident_pages_read_in_chinese(client, cast, story):
    client.force_login(cast.admin)
    down, kv = story["down"], story["kv"]
    pages = [
        "/incidents/",
        "/incidents/?source=all",
        "/incidents/?status=resolved",
        down.get_absolute_url(),
        kv.get_absolute_url(),
        f"/incidents/{kv.pk}/acknowledge/",
        f"/incidents/{down.pk}/acknowledge/",
    ]
    for path in pages:
        assert_speaks_chinese(client.get(path, HTTP_ACCEPT_LANGUAGE=ZH), names=names(cast), where=path)
    page = client.get(down.get_absolute_url(), HTTP_ACCEPT_LANGUAGE=ZH).content.decode()
    assert "时间线" in page and "根因" in page and "告警已恢复：已缓解。" in page
    assert f"由 <strong>{cast.sre.username}</strong> 于" in page
    listing = client.get("/incidents/", HTTP_ACCEPT_LANGUAGE=ZH).content.decode()
    assert "未确认" in listing and "后解决" in listing


def test_the_incident_forms_read_in_chinese(client, cast, story):
    client.force_login(cast.admin)
    for path in (f"/incidents/{story['down'].pk}/edit/", "/incidents/new/"):
        response = client.get(path, HTTP_ACCEPT_LANGUAGE=ZH)
        assert_speaks_chinese(response, names=names(cast), where=path)
        assert "严重程度" in response.content.decode() and "后续行动" in response.content.decode()
    wrong = client.post("/incidents/new/", {"title": "x", "status": "resolved"}, HTTP_ACCEPT_LANGUAGE=ZH)
    assert "请填写解决时间。" in wrong.content.decode()


def test_the_review_reads_in_chinese_with_its_figures_and_charts(client, cast, story):
    client.force_login(cast.viewer)
    response = client.get("/incidents/review/?since=all", HTTP_ACCEPT_LANGUAGE=ZH)
    assert_speaks_chinese(response, names=names(cast), where="/incidents/review/")
    html = response.content.decode()
    assert "1 已解决" in html and "各大类占比" in html and "MTTA 均值" in html and "进程" in html
    with translation.override("zh-hans"):
        charts = _charts(review_figures(load_records(filters=ReviewFilters())))
        titles = [chart["title"] for chart in charts]
        assert titles[:3] == ["各大类占比", "各大类的 MTTA 与 MTTR（均值，分钟）", "每周故障数"]
        response_chart = charts[1]["figure"]
        assert response_chart["layout"]["yaxis"]["title"]["text"] == "分钟"
        assert [trace["name"] for trace in response_chart["data"]] == ["MTTA 均值", "MTTR 均值"]
        assert set(charts[0]["figure"]["data"][0]["labels"]) == {"进程", "OOM"}
    with translation.override("en"):
        english = _charts(review_figures(load_records(filters=ReviewFilters())))
        assert [c["title"] for c in english][0] == "Share by family"
        assert english[1]["figure"]["layout"]["yaxis"]["title"]["text"] == "minutes"


def test_a_drill_run_report_reads_in_chinese(client, cast, story):
    scenario = load_scenario("drill-host-down.yaml")
    seen = incidents_seen(
        incidents=list(Incident.objects.prefetch_related("instances", "timeline")),
        names={i.pk: i.name for i in story["instances"]},
        to_scenario_s=scenario_clock(started=T0, time_scale=1),
        faults=[],
        host_names={},
    )
    observations = [
        Observation(at_s=30, instance="node-a-0", verdict="failing", categories=("process.not_started",))
    ]
    report = DrillReport(
        scenario=scenario.name, description=scenario.description, time_scale=15, probe_interval_s=30,
        duration_s=270, real_s=18.2, observations=observations, incidents=seen,
        results=check(expect=scenario.expect, observations=observations, incidents=seen),
    )  # fmt: skip
    assert not report.passed
    run = DrillRun.objects.create(
        scenario="drill-host-down.yaml", status="done", passed=False, report=report.to_dict(),
        total_s=270, elapsed_s=270, created_by=cast.sre.username, finished_at=timezone.now(),
    )  # fmt: skip
    client.force_login(cast.viewer)
    drill_names = names(cast) | {"node-a-0", "node-a-1", "node-a-2", "node-b-0"}
    for path in ("/drills/", f"/drills/runs/{run.pk}/"):
        response = client.get(path, HTTP_ACCEPT_LANGUAGE=ZH)
        assert_speaks_chinese(response, names=drill_names, where=path)
    page = client.get(f"/drills/runs/{run.pk}/", HTTP_ACCEPT_LANGUAGE=ZH).content.decode()
    assert "未满足" in page and "预期判定为" in page and "<strong>未通过</strong>" in page
    english = client.get(f"/drills/runs/{run.pk}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert report.unmet[0] in english and "<strong>Failed</strong>: 270 scenario seconds" in english


def test_every_shipped_scenario_description_is_in_the_catalogue():
    assert {scenario.description for _, scenario in shipped()} <= set(DESCRIPTIONS)


def test_a_notification_is_in_notification_language(settings, story):
    target = NotificationTarget.objects.create(name="slack", kind="slack", url="http://127.0.0.1:9/")
    down = story["down"]
    english = delivery.payload(target=target, incident=down, event="opened")
    assert english["text"].startswith("Incident opened: [critical] Service down on chat-a")
    settings.NOTIFICATION_LANGUAGE = "zh-hans"
    chinese = delivery.payload(target=target, incident=down, event="opened")
    assert chinese["text"].startswith("故障开启：[严重] chat-a：")
    assert "*分类：*" in chinese["blocks"][2]["elements"][0]["text"]
    kv = delivery.payload(target=target, incident=story["kv"], event="opened")
    assert kv["blocks"][-1]["text"]["text"].startswith("确认")


def test_durations_and_the_postmortem_follow_the_language(story):
    with translation.override("zh-hans"):
        assert people_format.duration(560) == "9 分钟 20 秒"
        assert people_format.duration(7500) == "2 小时 5 分钟"
        text = postmortem(story["down"])
        assert text.startswith("# 故障复盘：chat-a：") and "## 时间线" in text and "- 严重程度：严重" in text
    with translation.override("en"):
        assert people_format.duration(560) == "9 min 20 s"
        assert postmortem(story["down"]).startswith("# Postmortem: Service down on chat-a")


def test_the_english_pages_say_what_they_said(client, cast, story):
    client.force_login(cast.viewer)
    page = client.get(story["down"].get_absolute_url(), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert '<html lang="en"' in page
    assert f"Acknowledged by <strong>{cast.sre.username}</strong>" in page
    assert "Alert cleared: mitigated." in page and "chat-a: down → up (back up: restarted)" in page
    assert "Root cause:" in page and "Status: mitigated → resolved" in page
    listing = client.get("/incidents/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "not acknowledged</span>" in listing and "Service down on chat-a" in listing
    review = client.get("/incidents/review/?since=all", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "1 open, 0 mitigated, 1 resolved" in review and "Share by family" in review
