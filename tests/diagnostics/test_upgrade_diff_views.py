"""The upgrade diff page, its downloads and `manage.py upgrade_diff`: for one instance and for
the fleet, in English and Simplified Chinese, and clear errors for a bad version or an unknown
instance."""

from __future__ import annotations

import io
import json
import tarfile
from urllib.parse import urlencode

import pytest
from django.core.management import call_command, execute_from_command_line
from django.urls import reverse

from tests.factories import make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}
EXTRA = "--swap-space 4 --num-scheduler-steps 8"
FILES = ["vllm-alerts.yml", "vllm-dashboard.json", "vllm-old-serve.sh"]


@pytest.fixture
def engineer(client, cast):
    client.force_login(cast.engineer)
    return client


@pytest.fixture
def instance():
    host = make_host(name="rack-u")
    gpu = make_gpu(host, model="a100-80gb")
    return make_instance(
        host,
        gpus=[gpu],
        name="vllm-old",
        engine_version="0.8.5",
        max_num_seqs=None,
        extra_args=EXTRA,
    )


def url(**query) -> str:
    return reverse("diagnostics:upgrade-diff") + ("?" + urlencode(query) if query else "")


def test_the_page_reports_one_instance_in_sections(engineer, instance):
    page = engineer.get(url(from_version="0.8.5", to_version="0.11.2", instance=instance.pk), **EN)
    html = page.content.decode()
    assert page.status_code == 200
    for section in ('id="metrics"', 'id="flags"', 'id="defaults"', 'id="configs"'):
        assert section in html
    assert (
        "<code>vllm:gpu_cache_usage_perc</code>" in html and "<code>vllm:kv_cache_usage_perc</code>" in html
    )
    assert "vllm:inter_token_latency_seconds" in html and "vllm:prefix_cache_hits_total" in html
    assert "<code>--disable-log-requests</code>" in html and "vllm-old" in html
    assert "1,024" in html and "256" in html  # A100: the 0.8 batch defaults, then 0.9's
    download = reverse("diagnostics:upgrade-diff-download")
    assert f"{download}?from_version=0.8.5&amp;to_version=0.11.2&amp;instance={instance.pk}&amp;file=" in html
    assert "https://github.com/vllm-project/vllm/pull/29330" in html


def test_the_instance_version_is_the_default_from(engineer, instance):
    page = engineer.get(url(to_version="0.11.2", instance=instance.pk), **EN)
    assert page.status_code == 200 and 'id="metrics"' in page.content.decode()
    form = engineer.get(url(instance=instance.pk), **EN)  # the instance page's link: a form only
    assert form.status_code == 200 and 'id="metrics"' not in form.content.decode()


def test_the_page_reports_the_fleet(engineer, instance):
    page = engineer.get(url(from_version="0.11.2", to_version="0.20.0"), **EN)
    html = page.content.decode()
    assert page.status_code == 200 and "for the fleet (1 vLLM instance)" in html
    assert "gpu_memory_utilization" in html and "0.92" in html
    assert "vllm-old-serve.sh" in html and "vllm-alerts.yml" in html and "vllm-dashboard.json" in html


def test_the_page_renders_in_simplified_chinese(engineer, instance):
    for query in ({"instance": instance.pk}, {}):
        page = engineer.get(url(from_version="0.8.5", to_version="0.11.2", **query), **ZH)
        html = page.content.decode()
        assert page.status_code == 200
        assert '<html lang="zh-hans"' in html
        assert "<code>vllm:gpu_cache_usage_perc</code>" in html and 'id="configs"' in html


def test_a_bad_version_is_a_form_error(engineer, instance):
    page = engineer.get(url(from_version="abc", to_version="0.11.2"), **EN)
    assert page.status_code == 400
    assert "<code>&#x27;abc&#x27;</code> is not a vLLM version like 0.11.2" in page.content.decode()
    backwards = engineer.get(url(from_version="0.11.2", to_version="0.8.5"), **EN)
    assert backwards.status_code == 400 and "must be newer" in backwards.content.decode()
    assert engineer.get(url(from_version="abc", to_version="0.11.2"), **ZH).status_code == 400


def test_the_regenerated_configs_download_one_by_one_and_together(engineer, instance):
    base = reverse("diagnostics:upgrade-diff-download")
    query = {"from_version": "0.8.5", "to_version": "0.11.2", "instance": instance.pk}
    alerts = engineer.get(base + "?" + urlencode({**query, "file": "vllm-alerts.yml"}))
    assert alerts.status_code == 200 and 'filename="vllm-alerts.yml"' in alerts["Content-Disposition"]
    assert b"vllm:kv_cache_usage_perc" in alerts.content and b"gpu_cache_usage_perc" not in alerts.content
    archive = engineer.get(base + "?" + urlencode({**query, "archive": "1"}))
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        assert sorted(tar.getnames()) == FILES
    assert engineer.get(base + "?" + urlencode({**query, "file": "nope.txt"})).status_code == 404
    assert (
        engineer.get(base + "?" + urlencode({"from_version": "abc", "to_version": "0.11.2"})).status_code
        == 400
    )


def test_viewers_cannot_open_it(client, cast):
    client.force_login(cast.viewer)
    assert client.get(url()).status_code == 403


def test_the_configs_index_links_to_it(engineer):
    assert (
        reverse("diagnostics:upgrade-diff") in engineer.get(reverse("diagnostics:configs")).content.decode()
    )


def test_the_command_prints_the_report(instance, capsys):
    call_command("upgrade_diff", "--from", "0.8.5", "--to", "0.11.2", "--instance", "vllm-old")
    out = capsys.readouterr().out
    assert "vLLM 0.8.5 -> 0.11.2, instance vllm-old" in out
    assert "vllm:gpu_cache_usage_perc" in out and "vllm:kv_cache_usage_perc" in out
    assert "--num-scheduler-steps (removed, 0.10.2) used by vllm-old" in out and "vllm-old-serve.sh" in out
    call_command("upgrade_diff", "--from", "0.8.5", "--to", "0.11.2", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["scope"] == "fleet" and data["targets"] == ["vllm-old"]
    assert {m["metric"] for m in data["metrics"]} >= {
        "vllm:gpu_cache_usage_perc",
        "vllm:time_per_output_token_seconds",
    }


def test_the_command_writes_the_configs(instance, tmp_path, capsys):
    call_command("upgrade_diff", "--from", "0.8.5", "--to", "0.11.2", "--output", str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "vllm-alerts.yml",
        "vllm-dashboard.json",
        "vllm-old-serve.sh",
    ]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--from", "abc", "--to", "0.11.2"], "'abc' is not a vLLM version like 0.11.2"),
        (["--from", "0.11.2", "--to", "0.8.5"], "must be newer"),
        (["--from", "0.8.5", "--to", "0.11.2", "--instance", "nope"], "No vLLM instance named nope"),
    ],
)
def test_the_command_fails_clearly_with_a_non_zero_status(instance, capsys, args, says):
    with pytest.raises(SystemExit) as exit_:
        execute_from_command_line(["manage.py", "upgrade_diff", *args])
    assert exit_.value.code != 0
    assert says in capsys.readouterr().err
