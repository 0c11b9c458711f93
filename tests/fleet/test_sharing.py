"""Instances sharing a base URL or GPUs: the comparison, the selection, and how the pages show it."""

import pytest
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from fleet.sharing import added_sharing, conflict_messages, normalised_url, sharing_by_instance, sharing_of
from tests.factories import make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("http://10.0.0.5:8000/", "http://10.0.0.5:8000"),
        ("HTTP://Node-A.Example.COM:8000", "http://node-a.example.com:8000"),
        ("http://node-a:80/", "http://node-a"),
        ("https://node-a:443/v1/", "https://node-a/v1"),
        ("https://node-a:80", "https://node-a:80"),
        ("http://[FE80::1]:8000/", "http://[fe80::1]:8000"),
        ("http://node-a:8000/Path/", "http://node-a:8000/Path"),
    ],
)
def test_it_compares_urls_without_trailing_slash_default_port_or_host_case(url, normal):
    assert normalised_url(url) == normal


@pytest.fixture
def pair():
    """Two instances on one host that share a URL (spelt differently) and one GPU."""
    host = make_host(name="node-a")
    gpus = [make_gpu(host, index=i) for i in range(3)]
    first = make_instance(host, name="vllm-a", base_url="http://10.0.0.5:8000", gpus=gpus[:1])
    second = make_instance(
        host, name="vllm-b", base_url="HTTP://10.0.0.5:8000/", gpus=gpus[:2], tensor_parallel_size=2
    )
    loner = make_instance(host, name="vllm-c", base_url="http://10.0.0.5:8001", gpus=gpus[2:])
    return first, second, loner, gpus


def test_it_finds_the_instances_sharing_a_base_url_or_gpus(pair):
    first, second, loner, gpus = pair
    shared = sharing_by_instance([first, second, loner])
    assert [i.name for i in shared[first.pk].base_url] == ["vllm-b"]
    assert [(s.gpu.index, [i.name for i in s.others]) for s in shared[second.pk].gpus] == [(0, ["vllm-a"])]
    assert [i.name for i in shared[second.pk].instances] == ["vllm-a"]
    assert not shared[loner.pk]


def test_it_answers_a_whole_page_in_two_queries(pair):
    first, second, loner, _ = pair
    with CaptureQueriesContext(connection) as captured:
        sharing_by_instance([first, second, loner])
    assert len(captured) == 2


def test_an_unsaved_candidate_is_checked_against_the_saved_instances(pair):
    first, _, _, gpus = pair
    candidate = sharing_of(base_url="http://10.0.0.5", gpus=[gpus[2]])
    assert not candidate.base_url
    assert [i.name for i in candidate.gpus[0].others] == ["vllm-c"]
    itself = sharing_of(base_url=first.base_url, gpus=[gpus[0]], exclude_pk=first.pk)
    assert [i.name for i in itself.instances] == ["vllm-b"]


def test_an_edit_is_answered_only_for_the_sharing_it_adds(pair):
    first, _, _, gpus = pair
    before = sharing_by_instance([first])[first.pk]
    same = sharing_of(base_url=first.base_url, gpus=[gpus[0]], exclude_pk=first.pk)
    assert not added_sharing(before=before, after=same)
    more = sharing_of(base_url=first.base_url, gpus=[gpus[2]], exclude_pk=first.pk)
    assert [i.name for i in added_sharing(before=before, after=more).instances] == ["vllm-c"]


def test_the_messages_name_the_other_instances(pair):
    first, _, _, gpus = pair
    messages = conflict_messages(sharing_of(base_url="http://10.0.0.5:8000", gpus=gpus[:2]))
    assert messages["base_url"] == ["vllm-a, vllm-b already serve http://10.0.0.5:8000."]
    assert messages["gpus"] == [
        "node-a/gpu0 is already used by vllm-a, vllm-b.",
        "node-a/gpu1 is already used by vllm-b.",
    ]


def _partial(instance) -> str:
    template = Template('{% include "fleet/instances/_sharing.html" with instance=subject %}')
    return template.render(Context({"subject": instance}))


def test_the_sharing_box_links_the_other_instances_and_gpus(pair):
    first, second, loner, gpus = pair
    html = _partial(second)
    assert "Shared with other instances" in html
    assert f'href="{first.get_absolute_url()}"' in html and f'href="{gpus[0].get_absolute_url()}"' in html
    assert "vllm-c" not in html
    assert _partial(loner).strip() == ""


def test_the_instance_list_marks_the_shared_ones_in_a_constant_number_of_queries(viewer_client, pair):
    content = viewer_client.get(reverse("fleet:instance-list")).content.decode()
    rows = {name: content[content.index(f">{name}</a>") :].split("</tr>")[0] for name in ("vllm-a", "vllm-c")}
    assert 'class="badge shared"' in rows["vllm-a"] and "Also served by vllm-b" in rows["vllm-a"]
    assert "shared" not in rows["vllm-c"]
    with CaptureQueriesContext(connection) as few:
        viewer_client.get(reverse("fleet:instance-list"))
    host = make_host()
    for i in range(10):
        make_instance(host, base_url="http://10.9.9.9:9000", gpus=[make_gpu(host, index=i)])
    with CaptureQueriesContext(connection) as many:
        viewer_client.get(reverse("fleet:instance-list"))
    assert len(many) == len(few)


# In a real browser; screenshots go to test-output/sharing-*.png


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_in_a_browser_the_form_offers_the_override_and_the_pages_show_the_sharing(page, live_server, cast):
    from django.db import connections

    try:
        _walk_through(page, live_server, cast)
    finally:
        connections.close_all()  # the ORM calls made while Playwright runs


def _shoot(page, name: str) -> None:
    from tests.browser import OUTPUT_DIR

    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT_DIR / f"sharing-{name}.png"), full_page=True)


def _walk_through(page, live_server, cast) -> None:
    from fleet.models import Instance
    from tests.browser import log_in

    host = make_host(name="gpu-a100-01", address="10.0.0.5")
    gpu = make_gpu(host, index=0)
    make_gpu(host, index=1)
    make_instance(host, name="vllm-b", base_url="http://10.0.0.5:8000", gpus=[gpu])
    log_in(page, live_server, cast.sre, f"/fleet/instances/new/?host={host.pk}")
    page.fill("#id_name", "vllm-a")
    page.fill("#id_served_model_name", "Qwen/Qwen3-8B")
    page.select_option("#id_gpus", [str(gpu.pk)])
    page.fill("#id_base_url", "http://10.0.0.5:8000/")
    page.press("#id_base_url", "Tab")  # inline validation runs on change
    page.wait_for_selector("#id_allow_shared")
    assert "vllm-b already serves http://10.0.0.5:8000." in page.inner_text("#form-fields")
    page.click("button.primary[type=submit]")
    page.wait_for_selector(".form-errors")
    assert not Instance.objects.filter(name="vllm-a").exists()
    page.locator(".field.shared-override").scroll_into_view_if_needed()
    _shoot(page, "form-refused")
    page.check("#id_allow_shared")
    page.click("button.primary[type=submit]")
    page.wait_for_selector("h1:has-text('vllm-a')")
    assert page.locator("#sharing a:has-text('vllm-b')").count() >= 1
    _shoot(page, "instance-page")

    page.goto(f"{live_server.url}/fleet/instances/")
    assert page.locator("tr:has-text('vllm-a') .badge.shared").count() == 2  # URL and GPU
    assert page.locator("select[name=enabled] option:checked").inner_text() == "Any"
    _shoot(page, "instance-list")

    page.goto(f"{live_server.url}/fleet/hosts/{host.pk}/edit/")
    assert page.locator("label[for=id_cpu_cores]").inner_text() == "CPU cores"
    page.fill("#id_rack", "r2")
    page.click("button.primary[type=submit]")
    page.wait_for_selector("text=GPU host gpu-a100-01 saved.")
    _shoot(page, "host-saved")

    page.goto(f"{live_server.url}/fleet/import/")
    twin = "{name: vllm-c, host: gpu-a100-01, base_url: 'http://10.0.0.5:8000', served_model_name: m}"
    page.fill("#id_text", f"instances:\n  - {twin}\n")
    page.click("button.primary[type=submit]")
    page.wait_for_selector(".import-warnings")
    _shoot(page, "import-preview")
