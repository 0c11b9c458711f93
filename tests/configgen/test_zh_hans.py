"""The config generators in Simplified Chinese: every generator page (with each preset, with
values that raise many cross-checks, with form errors, filled from an instance), the index
and the nginx linter with a config that breaks several rules read in Chinese outside
identifiers and the previews; the generated files are the same bytes in every language; the
English pages are as they were."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import translation

from diagnostics.configgen import nginx_lint, nginx_rules, registry, safety
from diagnostics.configgen.base import SpecErrors
from tests.factories import make_gateway, make_gpu, make_host, make_instance
from tests.zh import assert_speaks_chinese, english_left

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.5"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}

# Values that make each generator raise most of its cross-checks (warnings, errors, notes).
NOISY: dict[str, dict[str, str]] = {
    **{
        kind: {
            "vllm_version": "0.7",
            "log_requests": "off",
            "enable_prefix_caching": "off",
            "gpu_model": "a100-80gb",
            "tensor_parallel_size": "2",
            "gpu_devices": "0,1",
            "shm_size_gib": "2",
            "memory_request_gib": "90",
            "gpu_memory_utilization": "0.97",
            "max_num_seqs": "900",
        }
        for kind in registry.DEPLOYMENT
    },
    "nginx": {
        "proxy_read_timeout": "60s",
        "client_read_timeout_s": "50",
        "burst_per_ip": "0",
        "burst_per_key": "900",
        "anonymous_key": "shared",
        "keepalive": "0",
    },
    "client": {
        "connect_timeout_s": "0",
        "read_timeout_s": "5",
        "max_retries": "20",
        "max_keepalive": "500",
        "fallback_base_url": "http://10.0.0.9:8000/v1",
        "batch_concurrency": "64",
        "batch_requests_per_s": "0.1",
    },
    "alerts": {
        "vllm_version": "0.7",
        "kv_threshold": "0.5",
        "error_rate_threshold": "0.6",
        "ttft_threshold": "40",
        "gpu_temp_threshold": "95",
        "down_for": "10s",
    },
    "grafana": {"vllm_version": "0.7", "refresh": "10s", "gpu_exporter": "nvidia_smi"},
    "sglang": {
        "enable_metrics": "off",
        "api_key_env": "",
        "mem_fraction_static": "0.97",
        "chunked_prefill_size": "-1",
        "tensor_parallel_size": "2",
        "dp_size": "2",
        "gpu_devices": "0,1,2,3",
        "shm_size_gib": "2",
        "gpu_model": "a100-80gb",
        "context_length": "100000",
    },
}
# A wrong value per generator: a value with shell metacharacters, a choice that is not one,
# and a value the form does not show (it comes back under "Other settings in the link").
BROKEN: dict[str, dict[str, str]] = {
    **{kind: {"model": "a b; rm", "dtype": "float64", "port": "x"} for kind in ("vllm", "docker", "systemd")},
    "k8s": {"namespace": "Bad_Name", "replicas": "many", "tls": "maybe"},
    "nginx": {"burst_per_ip": "5; return 200", "balancing": "fastest", "upstream_servers": ""},
    "client": {"base_url": "ftp://x", "api_key_env": "bad key", "max_tokens": "-1"},
    "alerts": {"gpu_temp_metric": "temp-c", "kv_for": "soon", "job": "a b"},
    "grafana": {"title": "", "refresh": "1s", "job": "a'b"},
    "sglang": {"model": "a b; rm", "dtype": "float64", "port": "x", "mem_fraction_static": "1"},
}
LINTED = """
upstream backend {
    server 10.0.1.10:8000;
}
limit_req_zone $api_key zone=per_key:10m rate=5r/s;
map $http_authorization $api_key {
    default anonymous;
}
server {
    listen 80;
    proxy_read_timeout 60s;
    location /v1/chat/completions {
        limit_req zone=per_key burst=0;
        limit_req zone=per_key burst=500;
        proxy_pass http://backend;
    }
}
"""


@pytest.fixture
def fleet():
    host = make_host(name="rack-b")
    gpus = [make_gpu(host, index=i) for i in range(4)]
    chat = make_instance(host, gpus=gpus[:2], name="chat-70b", tensor_parallel_size=2, max_num_seqs=96)
    batch = make_instance(host, gpus=gpus[2:3], name="batch-8b", served_model_name="meta-llama/Llama-3.1-8B")
    make_instance(host, gpus=gpus[3:], name="embed-small", served_model_name="BAAI/bge-m3")
    gateway = make_gateway(name="edge-gw", instances=[chat, batch])
    return {"chat": chat, "batch": batch, "gateway": gateway}


def names(fleet) -> set[str]:
    return {"rack-b", "chat-70b", "batch-8b", "embed-small", "edge-gw", "meta-llama/Llama-3.1-8B"}


def page(client, kind: str, headers=ZH, **params):
    return client.get(reverse("diagnostics:config-generator", args=[kind]), params, **headers)


def presets(kind: str) -> list[str]:
    return list(registry.get(kind).presets) or [""]


@pytest.mark.parametrize(
    "kind, preset", [(kind, preset) for kind in registry.GENERATORS for preset in presets(kind)]
)
def test_every_generator_page_with_each_preset_reads_in_chinese(engineer, fleet, kind, preset):
    response = page(engineer, kind, **({"preset": preset} if preset else {}))
    assert_speaks_chinese(response, names=names(fleet), where=f"/configs/{kind}/?preset={preset}")
    content = response.content.decode()
    assert "交叉检查" in content and "复制" in content and "下载" in content
    assert "Cross-checks" not in content


@pytest.mark.parametrize("kind", list(registry.GENERATORS))
def test_a_page_with_many_cross_checks_reads_in_chinese(engineer, fleet, kind):
    response = page(engineer, kind, **NOISY[kind])
    assert_speaks_chinese(response, names=names(fleet), where=f"/configs/{kind}/ (noisy)")
    content = response.content.decode()
    assert "警告" in content and 'class="config"' in content


@pytest.mark.parametrize("kind", list(registry.GENERATORS))
def test_a_page_with_form_errors_reads_in_chinese(engineer, fleet, kind):
    response = page(engineer, kind, **BROKEN[kind])
    assert_speaks_chinese(response, names=names(fleet), where=f"/configs/{kind}/ (errors)")
    content = response.content.decode()
    assert "请先修正这些" in content and 'class="config"' not in content


def test_an_unknown_preset_and_a_value_from_the_link_read_in_chinese(engineer, fleet):
    unknown = page(engineer, "vllm", preset="huge")
    assert_speaks_chinese(unknown, names=names(fleet), where="/configs/vllm/?preset=huge")
    assert "没有预设" in unknown.content.decode()
    stray = page(engineer, "vllm", namespace="Bad_Name")
    assert_speaks_chinese(stray, names=names(fleet), where="/configs/vllm/?namespace=Bad_Name")
    assert "链接中的其他设置" in stray.content.decode()


def test_filling_from_an_instance_and_a_gateway_reads_in_chinese(engineer, fleet):
    filled = page(engineer, "docker", from_instance=fleet["chat"].pk)
    assert_speaks_chinese(filled, names=names(fleet), where="/configs/docker/?from_instance")
    assert "已从实例 <code>chat-70b</code> 填入。" in filled.content.decode()
    picker = filled.content.decode()
    assert "从实例填入" in picker and "— 选择实例 —" in picker
    gateway = page(engineer, "nginx", from_gateway=fleet["gateway"].pk)
    assert_speaks_chinese(gateway, names=names(fleet), where="/configs/nginx/?from_gateway")


def test_the_preview_partial_reads_in_chinese(engineer, fleet):
    url = reverse("diagnostics:config-generator", args=["client"])
    partial = engineer.get(url, NOISY["client"], HTTP_HX_REQUEST="true", HTTP_HX_TARGET="preview", **ZH)
    html = partial.content.decode()
    assert html.startswith('<div id="preview"')
    assert not english_left(html, names=names(fleet))
    assert "重试 20 次" in html


def test_the_index_reads_in_chinese(engineer):
    response = engineer.get(reverse("diagnostics:configs"), **ZH)
    assert_speaks_chinese(response, where="/configs/")
    content = response.content.decode()
    for title in ("vLLM 启动命令", "nginx 网关", "Prometheus 告警规则", "Grafana 仪表盘", "nginx 配置检查"):
        assert title in content


def test_the_linter_reads_in_chinese_with_a_config_that_breaks_several_rules(engineer):
    url = reverse("diagnostics:config-lint")
    response = engineer.post(url, {"text": LINTED, "longest_generation_s": "120"}, **ZH)
    assert_speaks_chinese(response, where="/configs/nginx/lint/ (findings)")
    content = response.content.decode()
    rules = {f.rule for f in nginx_lint.lint(LINTED).findings}
    assert len(rules) >= 6, rules
    assert "响应被缓冲" in content and "第 12 行" in content and "proxy_buffering off;" in content


@pytest.mark.parametrize(
    "data, expected",
    [
        ({"text": "server {\n  listen 80;\n  location / {\n"}, "语法错误"),
        ({"text": ""}, "配置为空"),
        ({"text": "events {}", "longest_generation_s": "soon"}, "最长生成时间：请填秒数。"),
    ],
)
def test_the_linter_reads_in_chinese_when_it_cannot_lint(engineer, data, expected):
    response = engineer.post(reverse("diagnostics:config-lint"), data, **ZH)
    content = response.content.decode()
    assert expected in content
    assert '<html lang="zh-hans"' in content and not english_left(content)


def test_a_clean_config_reads_in_chinese(engineer):
    (file,) = registry.get("nginx").render(registry.get("nginx").spec({}))
    response = engineer.post(reverse("diagnostics:config-lint"), {"text": file.content}, **ZH)
    assert_speaks_chinese(response, where="/configs/nginx/lint/ (clean)")
    assert re.search(r"已检查 \d+ 个路径匹配块，未发现问题", response.content.decode())


# -- the files: the same bytes in every language --------------------------------------------


def _cases() -> list[tuple[str, str, dict[str, str]]]:
    cases = [(kind, preset, {}) for kind in registry.GENERATORS for preset in presets(kind)]
    return cases + [(kind, "", NOISY[kind]) for kind in registry.GENERATORS]


@pytest.mark.parametrize("kind, preset, given", _cases())
def test_every_generator_writes_the_same_bytes_in_every_language(kind, preset, given):
    generator = registry.get(kind)
    outputs = {}
    for language in ("en", "zh-hans"):
        with translation.override(language):
            files = generator.render(generator.spec(given, preset=preset))
            outputs[language] = [(f.name, f.language, f.content.encode()) for f in files]
    assert outputs["zh-hans"] == outputs["en"]
    assert all(not re.search(r"[\u4e00-\u9fff]", content.decode()) for _, _, content in outputs["en"])


@pytest.mark.parametrize("kind", list(registry.GENERATORS))
def test_a_downloaded_file_is_the_same_bytes_from_a_chinese_page(engineer, kind):
    url = reverse("diagnostics:config-download", args=[kind])
    generator = registry.get(kind)
    for file in generator.render(generator.spec(NOISY[kind])):
        params = {**NOISY[kind], "file": file.name}
        english, chinese = engineer.get(url, params, **EN), engineer.get(url, params, **ZH)
        assert english.status_code == chinese.status_code == 200
        assert chinese.content == english.content == file.content.encode()


def test_the_terminal_output_stays_english(capsys):
    import io

    from django.core.management import call_command

    err = io.StringIO()
    with translation.override("zh-hans"):
        call_command("genconfig", "client", "--set", "max_retries=20", stdout=io.StringIO(), stderr=err)
    assert "[error] 20 retries" in err.getvalue()


# -- text made in Python, in the reader's language ------------------------------------------


def test_checks_findings_and_refusals_follow_the_active_language():
    nginx = registry.get("nginx")
    spec = nginx.spec(NOISY["nginx"])
    with translation.override("zh-hans"):
        chinese = [c.title for c in nginx.checks(spec)]
        refused = _refusal("client", {"max_tokens": "-1"})
        finding = nginx_rules.check(nginx_rules.parse_text(LINTED)["config"][0]["parsed"])[0]
    with translation.override("en"):
        english = [c.title for c in nginx.checks(spec)]
    assert any("proxy_read_timeout 60s 没有高于最长生成时间" in t for t in chinese)
    assert any(t.endswith("is not below the client's read timeout 50s") for t in english)
    assert refused == "-1 超出 1-1000000 的范围"
    assert (
        finding.title == "上游 `backend` 不保留空闲连接" and finding.fix == "keepalive 64;"
    )  # the fix is nginx
    with translation.override("zh-hans"):
        try:
            safety.port_number("port", "x")
        except safety.UnsafeValue as exc:
            assert str(exc) == "port: `'x'` 不是端口号"


def _refusal(kind: str, given: dict[str, str]) -> str:
    try:
        registry.get(kind).spec(given)
    except SpecErrors as exc:
        return next(iter(exc.errors.values()))
    raise AssertionError("accepted")


def test_a_dropped_flag_is_noted_in_english_in_the_file_and_in_chinese_on_the_page(engineer):
    content = page(engineer, "vllm", vllm_version="0.8", enable_prefix_caching="off").content.decode()
    note = "--no-enable-prefix-caching left out: not in vLLM 0.8 (V1 turns prefix caching on by default)"
    assert f"# {note}" in content
    assert (
        "已省略 <code>--no-enable-prefix-caching</code>：vLLM 0.8 没有该参数（V1 默认开启前缀缓存）"
        in content
    )


# -- English is as it was ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(registry.GENERATORS))
def test_the_english_pages_are_unchanged(engineer, kind):
    content = page(engineer, kind, headers=EN, **NOISY[kind]).content.decode()
    assert '<html lang="en"' in content
    assert "Cross-checks" in content and ">Copy<" in content and "Generate" in content
    assert registry.get(kind).label in content
    assert not re.search(r"[\u4e00-\u9fff]", content.replace("简体中文", ""))
    broken = page(engineer, kind, headers=EN, **BROKEN[kind]).content.decode()
    assert "Fix these first" in broken and not re.search(r"[\u4e00-\u9fff]", broken.replace("简体中文", ""))


def test_the_english_linter_is_unchanged(engineer):
    content = engineer.post(reverse("diagnostics:config-lint"), {"text": LINTED}, **EN).content.decode()
    assert "Lint an nginx config" in content and "line 12:" in content
    assert "responses are buffered, so streamed tokens arrive in bursts" in content
    assert not re.search(r"[\u4e00-\u9fff]", content.replace("简体中文", ""))
