"""The config pages: preview follows the inputs over HTMX, presets and the state in the URL,
fill from an instance, a gateway or a sizing, downloads (one file, tar archives), the nginx
linter page, and `manage.py genconfig` printing what the page shows."""

from __future__ import annotations

import html
import io
import tarfile
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from diagnostics.configgen import registry
from tests.conftest import HTMX_HEADERS
from tests.factories import make_gateway, make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db


def page(client, kind, **params):
    return client.get(reverse("diagnostics:config-generator", args=[kind]), params)


def test_the_index_lists_every_generator_and_the_linter(engineer):
    content = engineer.get(reverse("diagnostics:configs")).content.decode()
    for generator in registry.GENERATORS.values():
        assert generator.label in content
    assert "nginx linter" in content


@pytest.mark.parametrize("kind", list(registry.GENERATORS))
def test_every_generator_page_renders_its_files_and_checks(engineer, kind):
    response = page(engineer, kind)
    content = response.content.decode()
    assert response.status_code == 200
    assert 'class="config"' in content and "Copy" in content and "Download" in content
    assert 'hx-push-url="true"' in content


def test_a_changed_input_swaps_only_the_preview_and_the_url_keeps_the_state(engineer):
    url = reverse("diagnostics:config-generator", args=["vllm"])
    response = engineer.get(url, {"max_num_seqs": "77"}, HTTP_HX_TARGET="preview", **HTMX_HEADERS)
    content = response.content.decode()
    assert content.startswith('<div id="preview"') and "<form" not in content
    assert "--max-num-seqs 77" in content and "max_num_seqs=77" in content  # the share link


def test_a_preset_fills_the_guides_profile(engineer):
    content = page(engineer, "vllm", preset="high_throughput").content.decode()
    assert "--max-num-seqs 512" in content and "--max-num-batched-tokens 65536" in content


def test_a_bad_value_is_named_and_nothing_is_rendered(engineer):
    content = page(engineer, "nginx", burst_per_ip="5; return 200").content.decode()
    assert "Fix these first" in content and "burst_per_ip" in content
    assert 'class="config"' not in content


def test_fill_from_an_instance_takes_its_launch_flags(engineer):
    host = make_host()
    gpus = [make_gpu(host, index=2), make_gpu(host, index=3)]
    instance = make_instance(
        host, gpus=gpus, name="chat-a", tensor_parallel_size=2, base_url="http://10.0.0.9:8011"
    )
    content = page(engineer, "vllm", from_instance=instance.pk).content.decode()
    assert "export CUDA_VISIBLE_DEVICES=2,3" in content and "--tensor-parallel-size 2" in content
    assert "--port 8011" in content and "vllm serve Qwen/Qwen3-8B" in content and "chat-a-serve.sh" in content


def test_fill_from_an_instance_points_a_client_at_it(engineer):
    instance = make_instance(make_host(), base_url="http://10.0.0.9:8011", api_key_env="CHAT_KEY")
    content = page(engineer, "client", from_instance=instance.pk).content.decode()
    assert "BASE_URL = &#x27;http://10.0.0.9:8011/v1&#x27;" in content
    assert "&#x27;CHAT_KEY&#x27;" in content and "&#x27;Qwen/Qwen3-8B&#x27;" in content


def test_fill_from_a_gateway_puts_its_instances_in_the_upstream(engineer):
    host = make_host()
    a = make_instance(host, base_url="http://10.1.0.1:8000")
    b = make_instance(host, base_url="http://10.1.0.2:8001")
    gateway = make_gateway(instances=[a, b], url="https://llm.corp.example")
    content = page(engineer, "nginx", from_gateway=gateway.pk).content.decode()
    assert "server 10.1.0.1:8000 max_fails=3" in content and "server 10.1.0.2:8001" in content
    assert "server_name llm.corp.example;" in content and "listen 443 ssl;" in content


def test_a_sizing_result_links_to_a_launch_config_with_its_flags(engineer):
    sizing = engineer.get(
        reverse("diagnostics:sizing"), {"model": "qwen3-8b", "gpu": "l40s", "max_model_len": "16384"}
    ).content.decode()
    link = next(part for part in sizing.split('"') if part.startswith("/configs/vllm/?"))
    query = parse_qs(urlparse(link.replace("&amp;", "&")).query)
    assert query["model"] == ["Qwen/Qwen3-8B"] and query["gpu_model"] == ["l40s"]
    assert query["max_model_len"] == ["16384"] and "memory_limit_gib" in query
    content = engineer.get(link.replace("&amp;", "&")).content.decode()
    assert "Sizing on 1 x l40s" in content


def test_downloads_give_one_file_or_a_tar_of_the_whole_deployment(engineer):
    url = reverse("diagnostics:config-download", args=["systemd"])
    one = engineer.get(url, {"file": "vllm-vllm-watchdog.sh"})
    assert one["Content-Disposition"] == 'attachment; filename="vllm-vllm-watchdog.sh"'
    assert one.content.startswith(b"#!/usr/bin/env bash")
    bundle = engineer.get(url, {"archive": "deployment", "preset": "large_model"})
    with tarfile.open(fileobj=io.BytesIO(bundle.content)) as archive:
        names = archive.getnames()
        assert archive.getmember("vllm-serve.sh").mode == 0o755
    assert set(names) >= {"vllm-serve.sh", "vllm-docker.sh", "vllm-k8s.yaml", "vllm-vllm.service"}
    assert engineer.get(url, {"file": "nope"}).status_code == 404
    assert engineer.get(url, {"name": "Bad Name"}).status_code == 400


def test_an_unknown_generator_is_not_found(engineer):
    assert page(engineer, "helm").status_code == 404


def test_viewers_cannot_use_the_generators(viewer_client):
    assert page(viewer_client, "vllm").status_code == 403


def test_the_linter_page_shows_findings_with_lines_and_fixes(engineer):
    text = "server {\n  location /v1/ {\n    proxy_pass http://127.0.0.1:8000;\n  }\n}\n"
    content = engineer.post(reverse("diagnostics:config-lint"), {"text": text}).content.decode()
    assert "line 2:" in content and "proxy_buffering off;" in content and "proxy_http_version 1.1;" in content


def test_the_linter_takes_an_upload_and_refuses_what_it_cannot_read(engineer):
    url = reverse("diagnostics:config-lint")
    upload = SimpleUploadedFile("nginx.conf", b"http { server { listen 80 } }")
    assert "not terminated" in engineer.post(url, {"file": upload}).content.decode()
    response = engineer.post(url, {"file": SimpleUploadedFile("x.conf", b"\xff\xfe")})
    assert response.status_code == 400 and "not UTF-8" in response.content.decode()


def test_genconfig_prints_what_the_page_shows(engineer):
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "genconfig", "nginx", "--preset", "low_latency", "--set", "rate_per_ip=7", stdout=out, stderr=err
    )
    content = page(engineer, "nginx", preset="low_latency", rate_per_ip="7").content.decode()
    assert "rate=7r/s" in out.getvalue() and "proxy_read_timeout 90s;" in out.getvalue()
    assert out.getvalue().splitlines()[3] in content
    assert "[ok] Timeout chain" in err.getvalue()


def test_genconfig_fills_from_an_instance_and_writes_files(tmp_path):
    make_instance(make_host(), name="batch-1", max_num_seqs=48)
    call_command(
        "genconfig", "systemd", "--from-instance", "batch-1", "--output", str(tmp_path), stderr=io.StringIO()
    )
    assert "--max-num-seqs 48" in (tmp_path / "vllm-batch-1.service").read_text()
    assert (tmp_path / "vllm-batch-1-watchdog.sh").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["vllm", "--set", "nope=1"], "nope: no such setting"),
        (["vllm", "--set", "port"], "use KEY=VALUE"),
        (["vllm", "--preset", "huge"], "no preset 'huge'"),
        (["vllm", "--set", "model=a b"], "model:"),
        (["vllm", "--from-instance", "ghost"], "no instance named 'ghost'"),
    ],
)
def test_genconfig_refuses_bad_input_clearly(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("genconfig", *args, stdout=io.StringIO(), stderr=io.StringIO())


@pytest.mark.parametrize(
    ("post", "said"),
    [
        ({"text": "server {\n  listen 80;\x00\n}\n"}, "holds a NUL byte (line 2)"),
        (
            {"file": SimpleUploadedFile("nginx.conf", b"server {\n  listen 80;\x00\n}\n")},
            "holds a NUL byte (line 2)",
        ),
        ({"file": SimpleUploadedFile("nginx.conf", bytes(range(256)) * 40)}, "not UTF-8 text"),
        ({"text": "server { listen 80; }", "longest_generation_s": "inf"}, "at most 604,800"),
    ],
)
def test_the_linter_page_answers_unreadable_input_with_a_clear_400(engineer, post, said):
    response = engineer.post(reverse("diagnostics:config-lint"), post)
    assert response.status_code == 400 and said in html.unescape(response.content.decode())


def test_the_linter_page_reads_a_config_nested_thousands_deep_as_a_syntax_error(engineer):
    text = "http {" + " server {" * 20_000 + "}" * 20_000 + "}"
    response = engineer.post(reverse("diagnostics:config-lint"), {"text": text})
    assert response.status_code == 200 and "nested hundreds deep" in response.content.decode()
