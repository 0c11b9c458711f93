"""Log triage in Simplified Chinese: the rules' causes and fixes, the finding titles, the exit
codes and the access log's story read in Chinese; the log lines, addresses and commands stay
as they are; a stored run is shown in the reader's language, new rows and old ones alike; the
English page says what it said before."""

from __future__ import annotations

from html import unescape
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.translation import gettext, override

from diagnostics.models import TriageRun
from diagnostics.triage.access_story import describe
from diagnostics.triage.engine import triage_text
from diagnostics.triage.messages import translatable_texts
from diagnostics.triage.rules import shipped
from diagnostics.triage.shown import shown_result, with_code
from diagnostics.triage_service import run_upload
from tests.triage import access_logs
from tests.zh import assert_speaks_chinese, english_left

pytestmark = pytest.mark.django_db

DATA = Path(__file__).parent / "data"
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.5"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}
OOM = "real/vllm-12529-v1-oom.log"
CUDA_ERROR = "real/ollama-3765-cuda-oom.log"
RATE_LIMITED = "real/nginx-crowdsec-hub-420.log"
OOM_THEN_502 = "samples/oom_kill_then_timeouts_and_502s.log"
EVERY_LOG = sorted(str(p.relative_to(DATA)) for p in DATA.glob("*/*.log"))
SPIKE_HEADLINE_ZH = "限流（429 激增）：14:00 至 14:05 期间，88 % 的 429 来自客户端 10.0.3.7"
SPIKE_HEADLINE_EN = "88 % of the 429s came from client 10.0.3.7 between 14:00 and 14:05"


@pytest.fixture
def engineer(client, cast):
    client.force_login(cast.engineer)
    return client


def log(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8", errors="replace")


def paste(client, text: str, language: dict):
    return client.post(reverse("diagnostics:triage"), {"text": text}, **language)


@pytest.mark.parametrize("name", [OOM, CUDA_ERROR, RATE_LIMITED, OOM_THEN_502])
def test_an_engine_log_triaged_in_chinese_leaves_no_english_outside_the_excerpts(engineer, name):
    response = paste(engineer, log(name), ZH)
    assert_speaks_chinese(response, where=name)
    html = response.content.decode()
    assert "可能的根因：" in html and "修复：" in html and "匹配的行" in html
    assert '<pre class="log-excerpt">' in html  # the log's own lines, as they are


def test_the_finding_titles_use_the_glossary(engineer):
    assert "OOM：显存不足" in paste(engineer, log(OOM), ZH).content.decode()
    assert "CUDA 错误" in paste(engineer, log(CUDA_ERROR), ZH).content.decode()
    assert "限流：网关返回 HTTP 429" in paste(engineer, log(RATE_LIMITED), ZH).content.decode()


def test_exit_codes_are_explained_in_chinese_with_commands_as_code(engineer):
    html = paste(engineer, "Container exited with code 137\n", ZH).content.decode()
    assert "这不能证明是 OOM" in html and "<code>kill -9</code>" in html


@pytest.mark.parametrize("name", EVERY_LOG)
def test_every_log_of_the_accuracy_set_reads_in_chinese(engineer, name):
    assert_speaks_chinese(paste(engineer, log(name), ZH), where=name)


def test_the_access_story_is_told_in_chinese(engineer):
    response = paste(engineer, access_logs.rate_limit_spike(), ZH)
    assert_speaks_chinese(response, where="429 spike")
    html = response.content.decode()
    assert SPIKE_HEADLINE_ZH in html
    assert "这是限流，不是服务端错误" in html and "<code>limit_req</code>" in html
    assert "按客户端 IP 统计的请求大户" in html and "规则匹配详情" in html


def test_the_other_stories_and_the_quiet_log_read_in_chinese(engineer):
    for text in (access_logs.upstream_timeouts(), access_logs.upstream_timeouts("json"), access_logs.clean()):
        assert_speaks_chinese(paste(engineer, text, ZH), where="access log")
    assert (
        "网关超时（504）：120 个请求在等待上游时超时"
        in paste(engineer, access_logs.upstream_timeouts(), ZH).content.decode()
    )
    assert "一切正常" in paste(engineer, access_logs.clean(), ZH).content.decode()


def test_the_story_is_worded_at_display_time_from_its_data():
    story = triage_text(access_logs.rate_limit_spike()).story
    with override("zh-hans"):
        chinese = describe(story)
    with override("en"):
        english = describe(story)
    assert chinese["headline"] == SPIKE_HEADLINE_ZH
    assert english["headline"].endswith(SPIKE_HEADLINE_EN)


def test_the_english_page_says_what_it_said(engineer):
    html = paste(engineer, access_logs.rate_limit_spike(), EN).content.decode()
    assert SPIKE_HEADLINE_EN in html and "Top talkers by client IP" in html and "限流（429" not in html
    html = paste(engineer, log(OOM), EN).content.decode()
    rule = next(r for r in shipped() if r.id == "torch_cuda_oom")
    assert "OOM: GPU memory" in html and "Likely root cause:" in html
    assert with_code(rule.root_cause) in html and with_code(rule.fix) in html
    assert "可能的根因" not in html


def test_a_stored_run_is_shown_in_the_readers_language(engineer):
    result = triage_text(log(OOM_THEN_502)).to_dict()  # English, as a worker stores it
    run = TriageRun.objects.create(
        filename="node-3.log", size_bytes=10, created_by="erin", status="done", result=result
    )
    chinese = engineer.get(reverse("diagnostics:triage-run", args=[run.pk]), **ZH)
    assert_speaks_chinese(chinese, where="stored run")
    assert "OOM：主机内存不足" in chinese.content.decode()
    english = unescape(engineer.get(reverse("diagnostics:triage-run", args=[run.pk]), **EN).content.decode())
    assert result["root_cause"] in english.replace("<code>", "`").replace("</code>", "`")
    assert run.result == TriageRun.objects.get(pk=run.pk).result  # showing changes nothing stored


def test_a_stored_access_log_run_tells_its_story_in_chinese(engineer):
    result = triage_text(access_logs.rate_limit_spike()).to_dict()
    run = TriageRun.objects.create(
        filename="access.log", size_bytes=10, created_by="erin", status="done", result=result
    )
    chinese = engineer.get(reverse("diagnostics:triage-run", args=[run.pk]), **ZH)
    assert_speaks_chinese(chinese, where="stored access run")
    assert SPIKE_HEADLINE_ZH in chinese.content.decode()


def test_a_failed_run_shows_its_message_in_chinese_and_an_old_one_as_it_was(engineer, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    engineer.post(reverse("diagnostics:triage"), {"file": SimpleUploadedFile("u.log", "hé".encode("utf-16"))})
    run = TriageRun.objects.get()
    run_upload(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "UTF-16" in run.error  # English kept for the API
    chinese = engineer.get(reverse("diagnostics:triage-run", args=[run.pk]), **ZH)
    assert_speaks_chinese(chinese, where="failed run")
    assert "日志是 UTF-16 编码" in chinese.content.decode()
    old = TriageRun.objects.create(
        filename="o.log", created_by="erin", status="failed", error="typed long ago"
    )
    assert (
        "typed long ago"
        in engineer.get(reverse("diagnostics:triage-run", args=[old.pk]), **ZH).content.decode()
    )


def test_the_page_with_recent_uploads_and_a_run_in_progress_reads_in_chinese(engineer):
    for status in ("pending", "running", "done", "failed"):
        TriageRun.objects.create(
            filename=f"{status}.log", size_bytes=4 << 20, created_by="erin", status=status
        )
    page = engineer.get(reverse("diagnostics:triage"), **ZH)
    assert_speaks_chinese(page, where="triage page")
    html = page.content.decode()
    assert "最近上传" in html and "等待工作进程" in html and "读取中" in html
    running = TriageRun.objects.get(status="running")
    progress = engineer.get(reverse("diagnostics:triage-run", args=[running.pk]), **ZH)
    assert_speaks_chinese(progress, where="run in progress")


def test_input_errors_are_said_in_chinese(engineer):
    empty = paste(engineer, "  ", ZH)
    assert empty.status_code == 400 and "请粘贴日志" in empty.content.decode()
    assert not english_left(empty.content.decode())
    assert "paste a log" in paste(engineer, "  ", EN).content.decode()


def test_every_rule_text_and_finding_title_has_a_chinese_translation():
    texts = list(translatable_texts())
    assert len(texts) >= 2 * len(shipped())  # a root cause and a fix each, and the notes
    with override("zh-hans"):
        untranslated = [where for text, where in texts if gettext(text) == text]
    assert not untranslated


def test_shown_result_translates_a_copy_and_keeps_identifiers_as_code():
    result = triage_text(log(OOM_THEN_502)).to_dict()
    with override("zh-hans"):
        shown = shown_result(result)
    assert shown["category_label"] == "OOM：主机内存不足"
    assert "<code>dmesg -T | grep -E &quot;Out of memory|oom-kill&quot;</code>" in shown["fix"]
    assert result["category_label"] == "OOM: host memory"  # the stored result is left as it was
