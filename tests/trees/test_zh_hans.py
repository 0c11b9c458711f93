"""The troubleshooting trees in Simplified Chinese: every step of every tree reads in Chinese
(questions, answers, explanations, fixes, titles, corrections, the guide's own section
titles), the probes' evidence and saved walkthroughs are shown in the reader's language, every
text of the YAML is in the catalogue, and the English walk reads as before."""

from __future__ import annotations

import html
import re

import polib
import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import override

from core.i18n import later
from diagnostics.models import SavedWalkthrough
from diagnostics.trees.evidence import read
from diagnostics.trees.messages import NODE_FIELDS, translatable_texts
from diagnostics.trees.model import Tree, trees
from diagnostics.trees.sources import section
from diagnostics.trees.walk import walk
from fleet.models import InstanceState
from tests.factories import make_gateway, make_host, make_instance
from tests.trees.paths import dotted, paths_to_every_node
from tests.zh import assert_speaks_chinese, english_left

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}
PARTIAL = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "walk"}
TREES = ["guide", "timeouts", "rate_limiting", "oom", "cuda", "model_loading"]
CATALOGUE = settings.BASE_DIR / "diagnostics/trees/locale/zh_Hans/LC_MESSAGES/django.po"


def _url(tree_id: str) -> str:
    return reverse("diagnostics:walkthrough", args=[tree_id])


def _query(path: list[int], **more) -> dict:
    return ({"path": dotted(path)} if path else {}) | more


def _node_texts(tree: Tree, node_id: str) -> list[str]:
    node = tree.node(node_id)
    return [t for t in (*(getattr(node, key) for key in NODE_FIELDS), *(a.answer for a in node.answers)) if t]


def _wordy(text: str) -> bool:
    """A text with English words in it (not only numbers, codes or a status line)."""
    return len(re.findall(r"\b[a-z]{3,}\b", text)) >= 2


@pytest.fixture
def viewer(client, cast):
    client.force_login(cast.viewer)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("tree_id", TREES)
def test_every_step_of_every_tree_reads_in_chinese(viewer, tree_id):
    tree = trees()[tree_id]
    for node_id, path in paths_to_every_node(tree).items():
        partial = viewer.get(_url(tree_id), _query(path), **PARTIAL, **ZH)
        assert partial.status_code == 200, node_id
        content = partial.content.decode()
        left = english_left(content)
        assert not left, f"{tree_id}.{node_id}: English left:\n" + "\n".join(left)
        # none of the node's English texts is on the page (outside the identifiers it quotes):
        # each went through the catalogue
        unescaped = html.unescape(re.sub(r"<(code|pre)\b.*?</\1>", " ", content, flags=re.S))
        shown = [t[:60] for t in _node_texts(tree, node_id) if _wordy(t) and t[:60] in unescaped]
        assert not shown, f"{tree_id}.{node_id}: untranslated {shown}"


@pytest.mark.django_db
@pytest.mark.parametrize("tree_id", TREES)
def test_each_tree_page_reads_in_chinese_with_its_title_corrections_and_the_guides_headings(viewer, tree_id):
    tree = trees()[tree_id]
    response = viewer.get(_url(tree_id), **ZH)
    assert_speaks_chinese(response, where=tree_id)
    page = html.unescape(response.content.decode())
    assert "出处" in page and "指南 §" in page
    for source in tree.sources:
        with override("zh-hans"):
            assert source.title in re.sub(r"<[^>]+>", "", page)
    for correction in tree.corrections:
        assert correction.text[:50] not in page


@pytest.mark.django_db
def test_the_guides_sections_show_the_guides_own_chinese_titles():
    with override("zh-hans"):
        assert section("2.2.4").label == "指南 §2.2.4 — 连接超时排查"
        assert section("5.1").title == "系统化排错决策树"
        assert section("A").label == "指南附录 A — 报错速查表"
        assert section("2.5.2").title == "CUDA Error: device-side assert triggered"
        # the English the guide writes in its own heading is marked, not translated
        assert (
            '<span translate="no">CUDA Error: device-side assert triggered</span>'
            in section("2.5.2").label_html
        )
    with override("en"):
        assert section("2.2.4").label == "Guide §2.2.4 — Connection timeouts"
        assert section("2.2.4").label_html == "Guide §2.2.4 — Connection timeouts"


def test_every_yaml_text_is_translated_in_the_catalogue():
    po = {e.msgid: e for e in polib.pofile(str(CATALOGUE)) if not e.msgctxt}
    texts = list(translatable_texts())
    assert len(texts) > 600
    missing = [where for text, where in texts if text not in po or not po[text].msgstr]
    assert not missing, missing[:10]
    with override("zh-hans"):
        from django.utils.translation import gettext

        same = [where for text, where in texts if _wordy(text) and gettext(text) == text]
    assert not same, same[:10]


def test_the_translations_keep_the_commands_placeholders():
    with override("zh-hans"):
        from django.utils.translation import gettext

        for text, where in translatable_texts():
            for placeholder in ("HOST", "SERVER_IP", "MODEL", "GATEWAY", "PID"):
                if re.search(rf"\b{placeholder}\b", text):
                    assert re.search(rf"\b{placeholder}\b", gettext(text)), (where, placeholder)


@pytest.mark.django_db
@pytest.mark.parametrize("tree_id", TREES)
def test_the_english_walk_reads_as_before(viewer, tree_id):
    tree = trees()[tree_id]
    for node_id, path in paths_to_every_node(tree).items():
        page = html.unescape(viewer.get(_url(tree_id), _query(path), **EN).content.decode())
        assert '<html lang="en"' in page
        node = tree.node(node_id)
        for text in _node_texts(tree, node_id):
            if text in (node.how, node.fix):
                continue  # filled in for an instance, the same text without one
            assert text in page, f"{tree_id}.{node_id}: {text[:60]!r}"
        assert "<code>" not in page.split('<div id="walk">', 1)[1].split("Metric:", 1)[0] or node.metric
        assert "Source:" in page and "Guide §" in page
        assert tree.title in page


@pytest.fixture
def instance(db):
    instance = make_instance(make_host(), name="chat-a")
    make_gateway(instances=[instance])
    now = timezone.now().isoformat()
    gone = later("the engine's process is gone from the GPU")  # a finding stored as a message
    InstanceState.objects.create(
        instance=instance,
        findings=[
            {
                "code": "process.gone",
                "category": "process.gone",
                "severity": "down",
                "source": "gpu",
                "evidence": str(gone),
                "evidence_message": gone.to_json(),
            }
        ],
        kinds={kind: {"at": now, "result": {}} for kind in ("health", "gpu", "metrics")},
    )
    instance.refresh_from_db()
    return instance


@pytest.mark.django_db
def test_from_an_instance_the_probes_evidence_reads_in_chinese(client, cast, instance):
    client.force_login(cast.engineer)
    response = client.get(reverse("diagnostics:troubleshoot-instance", args=[instance.pk]), follow=True, **ZH)
    assert_speaks_chinese(response, names={"chat-a"}, where="instance walkthrough")
    page = html.unescape(response.content.decode())
    assert "根据 chat-a 的探测回答：" in page and "引擎进程已从 GPU 上消失" in page
    assert '<span class="badge ok">探测</span>' in page
    english = html.unescape(
        client.get(
            reverse("diagnostics:troubleshoot-instance", args=[instance.pk]), follow=True, **EN
        ).content.decode()
    )
    assert (
        "answered from chat-a's probes:" in english and "the engine's process is gone from the GPU" in english
    )
    assert '<span class="badge ok">probe</span>' in english


def test_the_evidence_a_probe_gives_is_a_message_in_the_readers_language():
    measured = {"health", "stream", "gpu"}
    reading = read("gpu.thermal", findings=[], measured=measured)
    assert reading.value is False
    assert reading.evidence == "the latest gpu probe found no sign that GPU hot or throttling for temperature"
    with override("zh-hans"):
        assert reading.message.translated() == "最近一次GPU探测没有发现以下迹象：GPU 过热或因温度降频"
    ttft = read("timeout.ttft", findings=[], measured=measured)
    assert ttft.evidence.startswith("the latest health/stream probe")
    with override("zh-hans"):
        assert ttft.message.translated().startswith("最近一次健康检查/流式探测")
    up = read("reachable", findings=[], measured=measured)
    with override("zh-hans"):
        assert up.message.translated() == "健康检查探测得到了响应"
    plain = read(
        "process.gone",
        findings=[{"category": "process.gone", "evidence": "no vLLM on GPU 0"}],
        measured=set(),
    )
    assert plain.evidence == "no vLLM on GPU 0" and plain.message == "no vLLM on GPU 0"


def test_a_wrong_answer_in_the_path_is_explained_in_the_readers_language():
    result = walk(trees(), "guide", [9])
    assert result.problem == "step 1: 'What does the user see?' has no answer 10"
    with override("zh-hans"):
        assert result.problem_message.translated() == "第 1 步：“用户看到了什么？”没有第 10 个答案"


@pytest.mark.django_db
def test_a_saved_walkthrough_reads_in_the_readers_language(client, cast, instance):
    client.force_login(cast.engineer)
    path = paths_to_every_node(trees()["guide"])["g_conn_blocked"]  # a leaf
    client.post(
        reverse("diagnostics:walkthrough-save", args=["guide"]), {"path": "0", "instance": instance.pk}, **ZH
    )
    unfinished = SavedWalkthrough.objects.get()
    assert (
        unfinished.title == "From the symptom to the root cause (the decision tree of the guide): unfinished"
    )
    result = walk(trees(), "guide", path)
    assert result.finished
    client.post(reverse("diagnostics:walkthrough-save", args=["guide"]), {"path": dotted(path)}, **ZH)
    saved = SavedWalkthrough.objects.exclude(pk=unfinished.pk).get()
    assert saved.outcome.startswith(result.current.cause) and "\n\nFix: " in saved.outcome

    for item in (saved, unfinished):
        response = client.get(reverse("diagnostics:walkthrough-saved", args=[item.pk]), **ZH)
        assert_speaks_chinese(response, names={"chat-a", "erin"}, where=f"saved {item.title}")
    page = html.unescape(
        client.get(reverse("diagnostics:walkthrough-saved", args=[saved.pk]), **ZH).content.decode()
    )
    assert "从症状到根因（指南的决策树）：" in page and "结论" in page and "修复：" in page
    assert "用户看到了什么？" in page and saved.steps[0]["question"] not in page
    probed = html.unescape(
        client.get(reverse("diagnostics:walkthrough-saved", args=[unfinished.pk]), **ZH).content.decode()
    )
    assert "从症状到根因（指南的决策树）：未完成" in probed
    assert "引擎进程已从 GPU 上消失" in probed  # the evidence, kept as a message

    english = html.unescape(
        client.get(reverse("diagnostics:walkthrough-saved", args=[saved.pk]), **EN).content.decode()
    )
    assert saved.title in english and "Outcome" in english and "Fix: " in english
    assert saved.steps[0]["question"] in english

    index = client.get(reverse("diagnostics:troubleshoot"), **ZH)
    assert_speaks_chinese(index, names={"chat-a", "erin"}, where="/troubleshoot/")
    assert "从症状到根因（指南的决策树）：未完成" in html.unescape(index.content.decode())


@pytest.mark.django_db
def test_a_title_typed_by_a_person_is_shown_as_typed(client, cast):
    client.force_login(cast.engineer)
    client.post(reverse("diagnostics:walkthrough-save", args=["oom"]), {"path": "0", "title": "KV 满了"})
    saved = SavedWalkthrough.objects.get()
    page = client.get(reverse("diagnostics:walkthrough-saved", args=[saved.pk]), **ZH).content.decode()
    assert "<h1>KV 满了</h1>" in page


@pytest.mark.django_db
def test_the_commands_keep_the_instance_filled_in_under_a_translated_text(client, cast, instance):
    client.force_login(cast.engineer)
    tree = trees()["guide"]
    path = paths_to_every_node(tree)["g_conn_blocked"]
    page = html.unescape(client.get(_url("guide"), _query(path, instance=instance.pk), **ZH).content.decode())
    host = instance.base_url.split("//", 1)[1].split(":", 1)[0]
    assert f"<code>nc -zv -w 3 {host} " in page
