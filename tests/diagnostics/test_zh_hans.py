"""Sizing in Simplified Chinese: the page, its HTMX results, the comparison, adding a model and
sizing an instance read in Chinese for set-ups that start, set-ups that do not (each of vLLM's
start-up errors), hybrid and multi-replica models, and bad inputs; the capacity check's
findings, written with no reader, show in the reader's language; English is unchanged."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import override

from diagnostics import capacity_service
from diagnostics.models import CapacityFinding, InstanceSizing
from diagnostics.sizing import catalog
from diagnostics.sizing.calculator import SizingSpec, size
from fleet import gpu_catalog
from fleet.models import MetricSample
from tests.conftest import HTMX_HEADERS
from tests.factories import make_gpu, make_host, make_instance
from tests.zh import assert_speaks_chinese, english_left

pytestmark = pytest.mark.django_db
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}

SETUPS = {
    "the default": {},
    "fits, an older vLLM": {
        "model": "qwen3-8b",
        "gpu": "l40s",
        "max_model_len": "32768",
        "vllm_version": "0.11",
    },
    "two replicas": {"model": "qwen3-8b", "gpu": "h100-80gb", "gpus": "2", "tensor_parallel_size": "1"},
    "hybrid sliding layers": {"model": "gemma-3-27b-it", "gpu": "h100-80gb", "max_model_len": "32768"},
    "hybrid linear attention": {"model": "qwen3-next-80b-a3b-instruct", "gpu": "h200-141gb", "gpus": "2"},
    "TP beyond the KV heads": {"model": "llama-3.1-8b-instruct", "gpu": "h100-80gb", "gpus": "16"},
    "MLA, fp8 KV": {"model": "deepseek-v3", "gpu": "h200-141gb", "gpus": "8", "kv_cache_dtype": "fp8"},
    "no KV memory (0.10)": {"model": "gpt-oss-120b", "gpu": "h100-80gb", "vllm_version": "0.10"},
    "weights do not fit": {"model": "llama-3.3-70b-instruct", "gpu": "a100-80gb", "max_model_len": "8192"},
    "KV too small": {
        "model": "llama-3.1-70b-instruct",
        "gpu": "h100-80gb",
        "gpus": "2",
        "max_model_len": "131072",
    },
    "others hold memory": {"model": "qwen3-8b", "gpu": "l40s", "other_used_gib": "20"},
    "longer than the model": {"model": "qwen3-8b", "gpu": "l40s", "max_model_len": "1000000"},
    "heads not divisible": {
        "model": "qwen3-8b",
        "gpu": "h100-80gb",
        "gpus": "3",
        "tensor_parallel_size": "3",
    },
    "no launch: TP x PP > GPUs": {
        "model": "qwen3-8b",
        "gpu": "l40s",
        "gpus": "3",
        "tensor_parallel_size": "5",
    },
    "no launch: uneven replicas": {
        "model": "qwen3-8b",
        "gpu": "l40s",
        "gpus": "3",
        "tensor_parallel_size": "2",
    },
    "an unknown model and bad numbers": {"model": "acme-secret-7b", "gpus": "0", "max_model_len": "8"},
}


@pytest.fixture
def engineer(client, cast):
    client.force_login(cast.engineer)
    return client


def fragment(html: str, element_id: str) -> str:
    """The element with this id (a section of a page that holds other areas' parts too)."""
    match = re.search(rf'<section class="card" id="{element_id}">.*?</section>', html, re.S)
    assert match, element_id
    return f'<html lang="zh-hans"><body>{match.group(0)}</body></html>'


@pytest.mark.parametrize("setup", list(SETUPS))
def test_the_sizing_page_and_its_results_read_in_chinese(engineer, setup):
    params = SETUPS[setup]
    page = engineer.get(reverse("diagnostics:sizing"), params, **ZH)
    assert_speaks_chinese(page, where=f"/sizing/ {setup}")
    partial = engineer.get(
        reverse("diagnostics:sizing"), params, HTTP_HX_TARGET="results", **HTMX_HEADERS, **ZH
    )
    html = partial.content.decode()
    assert html.startswith('<div id="results"')
    assert not english_left(html), (setup, english_left(html))


def test_the_results_say_it_in_the_glossarys_words(engineer):
    html = engineer.get(reverse("diagnostics:sizing"), SETUPS["fits, an older vLLM"], **ZH).content.decode()
    assert "可以启动：KV Cache" in html and "每块 GPU 的模型权重" in html
    assert "每块 GPU 每 token 的 KV 字节数" in html and "每请求 32,768 token 时的最大并发" in html
    assert "推荐启动参数" in html and "短对话场景" in html and "长文档场景" in html
    assert (
        "<code>2 (K, V) x 36 layers x 8 KV heads per GPU x 128 head dim x 2 B</code>" in html
    )  # formulas stay
    failing = engineer.get(
        reverse("diagnostics:sizing"), SETUPS["no KV memory (0.10)"], **ZH
    ).content.decode()
    assert "无法启动" in failing and "No available memory for the cache blocks." in failing  # vLLM's words
    assert "<code>--tensor-parallel-size 2</code>：vLLM 可以启动，KV Cache 容量" in failing
    uneven = engineer.get(reverse("diagnostics:sizing"), SETUPS["no launch: uneven replicas"], **ZH)
    assert "3 块 GPU 无法均分为 TP 2 × PP 1 的副本" in uneven.content.decode()


def test_an_unknown_model_is_named_in_chinese(engineer):
    html = engineer.get(reverse("diagnostics:sizing"), SETUPS["an unknown model and bad numbers"], **ZH)
    html = html.content.decode()
    assert "请检查输入" in html and '<span translate="no">model:</span>' in html
    assert "acme-secret-7b" in html and "选择一个有效的选项" in html


def test_the_comparison_reads_in_chinese(engineer):
    params = {f"a-{k}": v for k, v in SETUPS["fits, an older vLLM"].items()}
    params.update({f"b-{k}": v for k, v in SETUPS["weights do not fit"].items()})
    params.update({f"c-{k}": v for k, v in SETUPS["no launch: uneven replicas"].items()})
    response = engineer.get(reverse("diagnostics:sizing-compare"), params, **ZH)
    assert_speaks_chinese(response, where="/sizing/compare/")
    html = response.content.decode()
    assert "最多对比三种配置" in html and "配置 A" in html and "<samp>torch.OutOfMemoryError" in html
    assert "<th><code>--gpu-memory-utilization</code></th>" in html  # flags stay, as code
    bad = engineer.get(
        reverse("diagnostics:sizing-compare"), {"a-model": "acme-secret-7b", "b-model": ""}, **ZH
    )
    assert_speaks_chinese(bad, where="/sizing/compare/ bad")
    assert "— 无 —" in engineer.get(reverse("diagnostics:sizing-compare"), **ZH).content.decode()


def test_adding_a_model_reads_in_chinese_with_its_errors(engineer):
    upload = reverse("diagnostics:sizing-upload")
    assert_speaks_chinese(engineer.get(upload, **ZH), where="upload")
    broken = '{"num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28, "vocab_size": "many"}'
    refused = engineer.post(upload, {"config_text": broken}, **ZH)
    assert refused.status_code == 400
    refused.status_code = 200  # the form page itself, read as any other
    assert_speaks_chinese(refused, names={"many"}, where="upload, broken config")  # the paste's value
    assert "config.json 的 &#x27;vocab_size&#x27; 必须是整数" in refused.content.decode()
    empty = engineer.post(upload, {"name": ""}, **ZH)
    assert "请粘贴 config.json 或选择该文件。" in empty.content.decode()
    config = json.dumps({
        "_name_or_path": "acme/tiny-7b", "num_hidden_layers": 28, "hidden_size": 3584,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
        "max_position_embeddings": 32768,
    })  # fmt: skip
    added = engineer.post(upload, {"config_text": config, "params_billions": "7.6"}, follow=True, **ZH)
    assert_speaks_chinese(added, names={"acme/tiny-7b"}, where="after the upload")
    assert "acme/tiny-7b 已加入容量规划模型目录，键为 acme-tiny-7b。" in added.content.decode()


def test_sizing_an_instance_of_an_unknown_model_says_so_in_chinese(engineer):
    host = make_host()
    instance = make_instance(host, gpus=[make_gpu(host)], served_model_name="acme/secret-model", name="llm-x")
    response = engineer.get(reverse("diagnostics:sizing-instance", args=[instance.pk]), follow=True, **ZH)
    assert_speaks_chinese(response, names={"llm-x", "acme/secret-model"}, where="/sizing/instances/")
    assert "为 llm-x 做容量规划：服务的模型 &#x27;acme/secret-model&#x27; 不在容量规划模型目录中" in (
        response.content.decode()
    )


def a100_instance(name, **flags):
    host = make_host()
    flags.setdefault("served_model_name", "Qwen/Qwen3-32B")
    flags.setdefault("max_model_len", 32768)
    flags.setdefault("max_num_seqs", 256)
    return make_instance(host, gpus=[make_gpu(host, model="a100-80gb")], name=name, **flags)


def checked_fleet():
    """The guide's 03:00 case, flags that cannot start, long requests only, and an unknown
    model, each checked by the scheduled capacity check."""
    pressed = a100_instance("gpu-server-03")
    now = timezone.now()
    MetricSample.objects.bulk_create(
        MetricSample(instance=pressed, name=name, ts=now - timedelta(minutes=1), value=value)
        for name, value in {
            "prompt_length_p99": 30500,
            "kv_cache_usage": 0.99,
            "num_requests_waiting": 14,
        }.items()
    )
    broken = a100_instance(
        "gpu-server-04", served_model_name="meta-llama/Llama-3.3-70B-Instruct", max_model_len=8192
    )
    unknown = a100_instance("gpu-server-05", served_model_name="acme/unknown")
    capacity_service.check_fleet()
    return pressed, broken, unknown


NAMES = {"gpu-server-03", "gpu-server-04", "gpu-server-05", "Qwen/Qwen3-32B", "acme/unknown"}


def test_capacity_findings_are_stored_as_messages_and_shown_in_the_readers_language():
    pressed, broken, unknown = checked_fleet()
    finding = CapacityFinding.objects.get(instance=pressed, code="long_prompts_exhaust_kv")
    assert finding.title.startswith("Prompts of 30,500 tokens")  # English kept for the API and old readers
    assert finding.numbers["text"]["title"]["msgid"].startswith("Prompts of %(prompt)s tokens")
    with override("zh-hans"):
        assert finding.shown_title.startswith("30,500 token 的 prompt：KV Cache 只能同时容纳")
        assert "KV 使用率已达 99%" in finding.shown_detail
        assert "将长文档批量任务排队发送" in finding.shown_fix
        stopped = CapacityFinding.objects.get(instance=broken, code="will_not_start")
        assert stopped.shown_title == "按当前启动参数无法启动"
        assert "CUDA out of memory" in stopped.shown_detail  # vLLM's own words
        assert InstanceSizing.objects.get(instance=unknown).shown_problem == (
            "服务的模型 'acme/unknown' 不在容量规划模型目录中"
        )
    with override("en"):
        assert finding.shown_title == finding.title and finding.shown_fix == finding.fix
        assert "not in the sizing catalogue" in InstanceSizing.objects.get(instance=unknown).shown_problem


def test_the_instance_capacity_section_reads_in_chinese(client, cast):
    checked = checked_fleet()
    quiet = a100_instance("gpu-server-06", served_model_name="Qwen/Qwen3-8B", max_num_seqs=32)
    capacity_service.check_fleet()
    never = a100_instance("gpu-server-07")
    for role in (cast.viewer, cast.engineer):
        client.force_login(role)
        for instance in (*checked, quiet, never):
            html = client.get(instance.get_absolute_url(), **ZH).content.decode()
            section = fragment(html, "capacity")
            left = english_left(section, names=NAMES | {"gpu-server-06", "gpu-server-07", "Qwen/Qwen3-8B"})
            assert not left, (instance.name, left)
    pressed_page = client.get(checked[0].get_absolute_url(), **ZH).content.decode()
    assert "30,500 token 的 prompt" in pressed_page and "修复：" in pressed_page
    assert "<code>--max-model-len</code>" in pressed_page and "严重" in pressed_page
    assert "未做容量规划：服务的模型" in client.get(checked[2].get_absolute_url(), **ZH).content.decode()
    assert "尚未做容量规划" in client.get(never.get_absolute_url(), **ZH).content.decode()


def test_english_pages_are_unchanged(engineer):
    page = engineer.get(reverse("diagnostics:sizing"), SETUPS["fits, an older vLLM"], **EN).content.decode()
    assert '<html lang="en"' in page and "Starts: " in page and "Figures per GPU" in page
    assert "Maximum concurrency for 32,768 tokens per request" in page and "Short chat" in page
    assert "1.5 x " in page and "GiB weights + 8 GiB (tokenizer, request buffers, system)" in page
    failing = engineer.get(
        reverse("diagnostics:sizing"), SETUPS["no KV memory (0.10)"], **EN
    ).content.decode()
    assert "Will not start" in failing
    assert "<code>--tensor-parallel-size 2</code>: vLLM starts, with" in failing
    pressed, _, _ = checked_fleet()
    detail = engineer.get(pressed.get_absolute_url(), **EN).content.decode()
    assert (
        "Prompts of 30,500 tokens" in detail and "Fix:" in detail and "queue long-document batches" in detail
    )


def test_the_api_and_the_stored_sizing_stay_english_whatever_the_reader_reads():
    arch = catalog.find("qwen3-8b", catalog.shipped()).architecture()
    with override("zh-hans"):
        result = size(SizingSpec(arch=arch, gpu=gpu_catalog.get("l40s"), vllm_version="0.11")).to_dict()
    assert result["figures"][1]["label"] == "Memory vLLM requests per GPU"
    assert result["recommendations"]["scenarios"][0]["label"] == "Short chat"
    assert json.dumps(result)  # plain JSON, no messages left in it
