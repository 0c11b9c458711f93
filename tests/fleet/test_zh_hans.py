"""The inventory in Simplified Chinese, over a fleet with something on every page: several
hosts and GPUs, instances that share a base URL and a GPU, one failing, one down, one
disabled, one in maintenance, a gateway, change log entries from the web, the API and an
import, an import with errors, forms with validation errors. English pages stay as they were."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import override

from fleet import change_tracking, inventory_io
from fleet.models import Gateway, Gpu, GpuHost, Instance, InstanceState
from fleet.sharing import conflict_messages, sharing_by_instance
from incidents.models import MaintenanceWindow
from tests.factories import instance_form_data, make_gateway, make_gpu, make_host, make_instance
from tests.zh import assert_speaks_chinese, english_left

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en"}


@dataclass
class Fleet:
    rack_a: GpuHost
    rack_b: GpuHost
    rack_c: GpuHost
    gpus: list[Gpu]
    vllm_a: Instance
    vllm_b: Instance
    tgi_c: Instance
    ollama_d: Instance
    gateway: Gateway
    names: set[str]


def _state(instance: Instance, verdict: str, *, failures: int = 0, ago=timedelta(seconds=20)) -> None:
    InstanceState.objects.create(
        instance=instance,
        verdict=verdict,
        since=timezone.now() - timedelta(minutes=12),
        last_probe_at=timezone.now() - ago,
        consecutive_failures=failures,
    )


@pytest.fixture
def fleet(cast) -> Fleet:
    rack_a = make_host(name="rack-a", tags=["prod", "a100"], os="Ubuntu 22.04", notes="Moved to row four")
    rack_b = make_host(name="rack-b", datacenter="sh-2", rack="b07")
    rack_c = make_host(name="rack-c")
    gpus = [make_gpu(rack_a, index=i, pci_bus_id=f"00000000:1{i}:00.0") for i in range(4)]
    gpus += [make_gpu(rack_b, index=i, model="rtx-6000-ada", form_factor="pcie") for i in range(2)]
    gpus += [make_gpu(rack_c, index=0, model="mi300x", form_factor="oam")]
    vllm_a = make_instance(rack_a, name="vllm-a", base_url="http://10.0.0.5:8000", gpus=gpus[:1])
    vllm_b = make_instance(
        rack_a,
        name="vllm-b",
        base_url="http://10.0.0.5:8000/",
        gpus=gpus[:2],
        tensor_parallel_size=2,
        api_key_env="VLLM_API_KEY",
        extra_args="--enable-chunked-prefill",
        quantization="fp8",
    )
    tgi_c = make_instance(rack_b, name="tgi-c", engine="tgi", engine_version="", gpus=gpus[4:5])
    ollama_d = make_instance(rack_c, name="ollama-d", engine="ollama", enabled=False)
    _state(vllm_a, "up")
    _state(vllm_b, "failing", failures=2)
    _state(tgi_c, "down", failures=3)
    gateway = make_gateway(name="gw-a", kind="envoy", instances=[vllm_a, tgi_c], notes="Front door")
    MaintenanceWindow.objects.create(
        name="driver upgrade",
        host=rack_c,
        starts_at=timezone.now() - timedelta(minutes=5),
        ends_at=timezone.now() + timedelta(hours=1),
    )
    # The change log: a web create, an API edit and a delete that cascades.
    change_tracking.record_create(rack_a, actor=cast.sre, source="web")
    before = change_tracking.snapshot(vllm_b)
    vllm_b.engine_version, vllm_b.max_num_seqs = "0.11.3", 128
    vllm_b.save()
    change_tracking.record_update(vllm_b, before=before, actor=cast.sre, source="api")
    doomed = make_host(name="rack-old")
    make_gpu(doomed, index=0)
    change_tracking.delete_with_log(doomed, actor=None, source="import")
    change_tracking.record_create(gateway, actor=None, source="cli")
    names = {
        "rack-a", "rack-b", "rack-c", "vllm-a", "vllm-b", "tgi-c", "ollama-d", "gw-a",
        "Qwen/Qwen3-8B", "sam", "ada",
    }  # fmt: skip
    return Fleet(rack_a, rack_b, rack_c, gpus, vllm_a, vllm_b, tgi_c, ollama_d, gateway, names)


@pytest.fixture
def admin(client, cast):
    client.force_login(cast.admin)
    return client


def _pages(f: Fleet) -> list[str]:
    return [
        "/fleet/",
        "/fleet/?state=failing",
        "/fleet/?state=maintenance",
        "/fleet/?state=stale",
        "/fleet/hosts/",
        "/fleet/hosts/?q=nothing-matches",
        f"/fleet/hosts/{f.rack_a.pk}/",
        f"/fleet/hosts/{f.rack_c.pk}/",
        "/fleet/hosts/new/",
        f"/fleet/hosts/{f.rack_a.pk}/edit/",
        f"/fleet/hosts/{f.rack_a.pk}/delete/",
        "/fleet/gpus/",
        "/fleet/gpus/?sort=-memory",
        f"/fleet/gpus/{f.gpus[0].pk}/",
        f"/fleet/gpus/{f.gpus[4].pk}/",
        f"/fleet/gpus/{f.gpus[6].pk}/",
        "/fleet/gpus/new/",
        f"/fleet/gpus/{f.gpus[0].pk}/edit/",
        f"/fleet/gpus/{f.gpus[0].pk}/delete/",
        "/fleet/instances/",
        "/fleet/instances/?enabled=false",
        f"/fleet/instances/{f.vllm_b.pk}/edit/",
        "/fleet/instances/new/",
        f"/fleet/instances/{f.vllm_b.pk}/delete/",
        "/fleet/gateways/",
        f"/fleet/gateways/{f.gateway.pk}/",
        "/fleet/gateways/new/",
        f"/fleet/gateways/{f.gateway.pk}/edit/",
        f"/fleet/gateways/{f.gateway.pk}/delete/",
        "/fleet/import/",
    ]


def test_every_inventory_page_reads_in_chinese_over_a_rich_fleet(admin, fleet):
    for path in _pages(fleet):
        assert_speaks_chinese(admin.get(path, **ZH), names=fleet.names, where=path)


def test_the_instance_page_s_own_parts_read_in_chinese(admin, fleet):
    """The instance page holds the probes' and the capacity check's partials, which other
    catalogues translate; this checks the sharing card, the facts, the flags and the log."""
    for instance in (fleet.vllm_b, fleet.tgi_c, fleet.ollama_d):
        html = admin.get(instance.get_absolute_url(), **ZH).content.decode()
        assert '<html lang="zh-hans"' in html
        own = [_between(html, '<section class="card sharing-warning"', "</section>")]
        own += [
            _between(html, '<div class="grid2">', '<section class="card" id="capacity">'),
            _between(html, "<h2>变更记录", "</section>"),
        ]
        assert own[1] and own[2], instance.name
        for part in own:
            assert not english_left(part, names=fleet.names), (
                instance.name,
                english_left(part, names=fleet.names),
            )
    page = admin.get(fleet.vllm_b.get_absolute_url(), **ZH).content.decode()
    assert "与其他实例共享" in page and "它的基础 URL 也由" in page and "也被" in page
    assert "启动参数" in page and "取自 <code>$VLLM_API_KEY</code>" in page
    assert "修改" in page and "来自API" in page
    assert "（版本未知）" in admin.get(fleet.tgi_c.get_absolute_url(), **ZH).content.decode()


def _between(html: str, start: str, end: str) -> str:
    if start not in html:
        return ""
    rest = html[html.index(start) :]
    return rest[: rest.index(end) + len(end)] if end in rest else rest


def test_the_overview_words_states_in_the_glossary_s_terms(admin, fleet):
    page = admin.get("/fleet/", **ZH).content.decode()
    for word in ("正常", "降级", "宕机", "过期", "维护中", "未知", "连续失败 2 次", "集群"):
        assert word in page, word
    assert "维护" in page and "主机 rack-c" in page
    empty = admin.get("/fleet/?state=stale", **ZH).content.decode()
    assert "当前没有处于“过期”状态的实例。" in empty


def test_an_empty_inventory_reads_in_chinese(admin):
    for path in ("/fleet/", "/fleet/hosts/", "/fleet/gpus/", "/fleet/instances/", "/fleet/gateways/"):
        assert_speaks_chinese(admin.get(path, **ZH), where=path)
    assert "还没有GPU 主机" in admin.get("/fleet/hosts/", **ZH).content.decode()
    assert "还没有推理实例" in admin.get("/fleet/", **ZH).content.decode()


def test_a_long_list_pages_in_chinese(admin, fleet):
    for index in range(4, 30):
        make_gpu(fleet.rack_a if index < 8 else make_host(), index=index % 8)
    response = admin.get("/fleet/gpus/?page=2", **ZH)
    assert_speaks_chinese(response, names=fleet.names, where="/fleet/gpus/?page=2")
    page = response.content.decode()
    assert "第 2 页，共 2 页" in page and "上一页" in page and "降序排列" in page


def test_forms_with_validation_errors_read_in_chinese(admin, fleet):
    shared = admin.post(
        reverse("fleet:instance-create"),
        instance_form_data(fleet.rack_a, gpus=[fleet.gpus[1].pk, fleet.gpus[2].pk]),
        **ZH,
    )
    assert_speaks_chinese(shared, names=fleet.names, where="instance form, shared")
    page = shared.content.decode()
    assert "vllm-a, vllm-b 已在提供" in page and "10.0.0.5:8000。" in page
    assert "选了 2 块 GPU" in page and "仍然保存（有意共享）" in page

    shared_gpu = admin.post(
        reverse("fleet:instance-create"),
        instance_form_data(fleet.rack_a, base_url="http://10.0.0.9:8000", gpus=[fleet.gpus[0].pk]),
        **ZH,
    )
    assert "rack-a/gpu0 已被 vllm-a, vllm-b 使用。" in shared_gpu.content.decode()

    bad_url = admin.post(
        reverse("fleet:instance-create"), instance_form_data(fleet.rack_a, base_url="ftp://x"), **ZH
    )
    assert_speaks_chinese(bad_url, names=fleet.names, where="instance form, bad URL")
    assert "https://</span> 开头的 URL。" in bad_url.content.decode()

    host = admin.post(reverse("fleet:host-create"), {"name": "Bad Name", "address": "http://x:80"}, **ZH)
    assert_speaks_chinese(host, names=fleet.names, where="host form")
    assert "请输入 IP 地址或主机名，不带协议和端口。" in host.content.decode()

    gpu = admin.post(
        reverse("fleet:gpu-create"),
        {"host": fleet.rack_b.pk, "index": 0, "model": "h100-80gb", "form_factor": "pcie", "numa_node": 5,
         "nvlink_peers": "0, x", "mig_mode": "disabled"},
        **ZH,
    )  # fmt: skip
    assert_speaks_chinese(gpu, names=fleet.names, where="GPU form")
    page = gpu.content.decode()
    assert "请输入以逗号分隔的数字列表。" in page and "该主机上已有相同序号的 GPU。" in page
    assert "主机 rack-b 有 2 个 NUMA 节点：请使用 0..1。" in page


def test_an_import_with_errors_says_where_each_is_in_chinese(admin, fleet):
    text = (
        "hosts:\n"
        "  - name: rack-new\n"
        "    address: http://nope\n"
        "    colour: blue\n"
        "gpus:\n"
        "  - host: nowhere\n"
        "    index: 0\n"
        "    model: h100-80gb\n"
        "    form_factor: sxm\n"
        "instances:\n"
        "  - name: vllm-x\n"
        "    host: rack-a\n"
        "    base_url: http://10.0.0.7:8000\n"
        "    served_model_name: m\n"
        "    gpus: [7]\n"
        "  - name: vllm-x\n"
        "    host: rack-a\n"
        "    base_url: http://10.0.0.7:8000\n"
        "    served_model_name: m\n"
    )
    response = admin.post(reverse("fleet:import-preview"), {"text": text, "format": "yaml"}, **ZH)
    assert response.status_code == 400
    assert_speaks_chinese(_as_200(response), names=fleet.names | {"nowhere"}, where="import with errors")
    page = response.content.decode()
    assert "个错误：未导入任何内容" in page
    assert "第 2 行： <code>host rack-new: address</code>: 请输入 IP 地址或主机名，不带协议和端口。" in page
    assert "主机没有这个字段。" in page and "文件和数据库中都没有名为 nowhere 的主机" in page
    assert "主机 rack-a 上没有序号为 7 的 GPU。" in page and "实例重复（首次出现在第 11 行）。" in page


def test_a_clean_import_s_dry_run_reads_in_chinese_with_its_warnings(admin, fleet):
    text = (
        "hosts:\n"
        "  - name: rack-a\n"
        "    address: 10.0.0.99\n"
        "  - name: rack-new\n"
        "    address: 10.0.0.100\n"
        "instances:\n"
        "  - name: vllm-twin\n"
        "    host: rack-a\n"
        "    base_url: http://10.0.0.5:8000\n"
        "    served_model_name: m\n"
    )
    response = admin.post(reverse("fleet:import-preview"), {"text": text, "format": "yaml"}, **ZH)
    assert_speaks_chinese(response, names=fleet.names | {"vllm-twin"}, where="clean import")
    page = response.content.decode()
    assert "试运行：将新建 2 个，更新 1 个" in page and "+ 新建" in page and "~ 更新" in page
    assert "1 条警告：可以导入，但请确认是有意为之" in page and "应用此次导入" in page
    applied = admin.post(reverse("fleet:import-apply"), {"text": text, "fmt": "yaml"}, follow=True, **ZH)
    assert "导入完成：新建 2 个，更新 1 个，未变 0 个。" in applied.content.decode()


def test_saving_and_deleting_say_so_in_chinese(admin, fleet):
    data = {"name": "gw-b", "kind": "nginx", "url": "https://llm.example.com"}
    saved = admin.post(reverse("fleet:gateway-create"), data, follow=True, **ZH)
    assert "已添加网关 gw-b。" in saved.content.decode()
    gone = admin.post(reverse("fleet:host-delete", args=[fleet.rack_b.pk]), follow=True, **ZH)
    assert "已删除GPU 主机 rack-b 及 3 个依赖对象。" in gone.content.decode()


def _as_200(response):
    """The import's error page answers 400 on purpose; the sweep checks 200s."""
    response.status_code = 200
    return response


def test_the_english_pages_are_unchanged(admin, fleet):
    overview = admin.get("/fleet/", **EN).content.decode()
    assert '<html lang="en"' in overview and "failing 2× in a row" in overview and ">stale" in overview
    instance = admin.get(fleet.vllm_b.get_absolute_url(), **EN).content.decode()
    assert "Its base URL is also served by" in instance and "Launch arguments" in instance
    assert "via api" in instance and "Change log" in instance
    host = admin.get(f"/fleet/hosts/{fleet.rack_a.pk}/delete/", **EN).content.decode()
    assert "These go with it:" in host and "(GPU)" in host and "(instance)" in host
    gpus = admin.get("/fleet/gpus/", **EN).content.decode()
    assert "7 of 7 GPUs" in gpus and "Form factor" in gpus


def test_python_side_text_follows_the_language(fleet):
    with override("zh-hans"):
        assert fleet.vllm_b.state_text == "连续失败 2 次"
        assert fleet.ollama_d.state_text == "已停用"
        shared = conflict_messages(sharing_by_instance([fleet.vllm_a])[fleet.vllm_a.pk])
        assert shared["base_url"] == ["vllm-b 已在提供 http://10.0.0.5:8000。"]
        plan = inventory_io.plan_import(text="kind,name\nvm,b\n", fmt="csv")
        assert [str(e) for e in plan.errors] == [
            "第 2 行: kind: 未知类型 'vm'；可用类型：host, gpu, instance, gateway。"
        ]
    assert fleet.vllm_b.state_label == "failing 2× in a row"  # the API's and the logs' English
    english = inventory_io.plan_import(text="kind,name\nvm,b\n", fmt="csv")
    assert str(english.errors[0]) == "line 2: kind: Unknown kind 'vm'; use host, gpu, instance, gateway."


def test_the_api_refuses_in_the_reader_s_language(admin, fleet):
    url = reverse("api-instance-detail", args=[fleet.vllm_a.pk])
    answer = admin.patch(url, {"colour": "blue"}, content_type="application/json", **ZH)
    assert answer.status_code == 400 and answer.json() == {"colour": ["未知字段。"]}
