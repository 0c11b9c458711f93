"""The inventory pages: roles, live filtering, forms with inline validation, delete, change log."""

import re

import pytest
from django.urls import reverse

from fleet.models import ChangeLogEntry, Gpu, GpuHost, Instance
from tests.conftest import HTMX_HEADERS
from tests.factories import instance_form_data, make_gateway, make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db

LIST_URLS = ["fleet:host-list", "fleet:gpu-list", "fleet:instance-list", "fleet:gateway-list"]


def host_form(**overrides):
    data = {
        "name": "gpu-node-new",
        "address": "10.2.0.7",
        "datacenter": "fra1",
        "rack": "r12",
        "tags": "prod, h100",
        "numa_nodes": "2",
        "cpu_cores": "96",
        "ram_gb": "1024",
        "gpu_telemetry": "off",
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize("url_name", LIST_URLS)
def test_anonymous_users_are_sent_to_the_login_page(client, url_name):
    response = client.get(reverse(url_name))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


@pytest.mark.parametrize("url_name", LIST_URLS)
def test_a_user_in_no_role_group_is_refused(client, cast, url_name):
    client.force_login(cast.outsider)
    assert client.get(reverse(url_name)).status_code == 403


@pytest.mark.parametrize("role", ["viewer", "engineer", "sre", "admin"])
def test_every_role_can_read_the_inventory(client, cast, role):
    host = make_host(name="readable")
    client.force_login(cast.for_role(role))
    assert b"readable" in client.get(reverse("fleet:host-list")).content
    assert client.get(host.get_absolute_url()).status_code == 200


@pytest.mark.parametrize("role", ["viewer", "engineer"])
def test_viewers_and_engineers_cannot_change_the_inventory(client, cast, role):
    host = make_host()
    client.force_login(cast.for_role(role))
    assert client.get(reverse("fleet:host-create")).status_code == 403
    assert client.post(reverse("fleet:host-create"), host_form()).status_code == 403
    assert client.post(reverse("fleet:host-edit", args=[host.pk]), host_form()).status_code == 403
    assert client.post(reverse("fleet:host-delete", args=[host.pk])).status_code == 403
    assert GpuHost.objects.count() == 1 and not GpuHost.objects.filter(name="gpu-node-new").exists()


def test_the_host_list_has_an_empty_state_that_says_how_to_add_the_first_host(sre_client):
    content = sre_client.get(reverse("fleet:host-list")).content.decode()
    assert "No GPU hosts yet" in content
    assert reverse("fleet:host-create") in content


def test_an_htmx_filter_request_gets_only_the_results_partial(viewer_client):
    make_host(name="alpha-01", datacenter="fra1")
    make_host(name="beta-01", datacenter="ams1")
    headers = {**HTMX_HEADERS, "HTTP_HX_TARGET": "results"}
    response = viewer_client.get(reverse("fleet:host-list"), {"q": "alpha"}, **headers)
    content = response.content.decode()
    assert "<html" not in content and "alpha-01" in content and "beta-01" not in content


def test_a_plain_request_with_filters_renders_the_whole_page_so_links_can_be_shared(viewer_client):
    make_host(name="alpha-01", datacenter="fra1")
    make_host(name="beta-01", datacenter="ams1")
    content = viewer_client.get(reverse("fleet:host-list"), {"datacenter": "ams1"}).content.decode()
    assert "<html" in content and "beta-01" in content and "alpha-01" not in content


def test_the_list_sorts_by_a_column_both_ways(viewer_client):
    for name in ["b-host", "a-host", "c-host"]:
        make_host(name=name)
    content = viewer_client.get(reverse("fleet:host-list"), {"sort": "-name"}).content.decode()
    assert content.index("c-host") < content.index("b-host") < content.index("a-host")


def test_the_list_paginates(viewer_client):
    for i in range(30):
        make_host(name=f"node-{i:02d}")
    first = viewer_client.get(reverse("fleet:host-list")).content.decode()
    second = viewer_client.get(reverse("fleet:host-list"), {"page": 2}).content.decode()
    assert "node-00" in first and "node-29" not in first
    assert "node-29" in second and "Page 2 of 2" in second


def test_the_instance_list_filters_by_engine(viewer_client):
    host = make_host()
    make_instance(host, name="vllm-a", engine="vllm")
    make_instance(host, name="tgi-a", engine="tgi")
    content = viewer_client.get(reverse("fleet:instance-list"), {"engine": "tgi"}).content.decode()
    assert "tgi-a" in content and "vllm-a" not in content


@pytest.mark.parametrize("url_name", LIST_URLS)
def test_list_pages_make_the_same_number_of_queries_for_3_or_30_rows(
    viewer_client, url_name, django_assert_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def populate(n):
        for _ in range(n):
            host = make_host()
            gpu = make_gpu(host)
            instance = make_instance(host, gpus=[gpu])
            make_gateway(instances=[instance])

    populate(3)
    with CaptureQueriesContext(connection) as few:
        viewer_client.get(reverse(url_name))
    populate(27)
    with CaptureQueriesContext(connection) as many:
        viewer_client.get(reverse(url_name), {"per_page": 50})
    assert len(many) == len(few)


def test_an_sre_adds_a_host_and_the_change_log_says_who(sre_client, cast):
    response = sre_client.post(reverse("fleet:host-create"), host_form())
    host = GpuHost.objects.get(name="gpu-node-new")
    assert response.status_code == 302 and response.url == host.get_absolute_url()
    assert host.tags == ["h100", "prod"]
    entry = ChangeLogEntry.objects.for_object(host).get()
    assert (entry.action, entry.actor, entry.source) == ("create", cast.sre, "web")
    assert entry.changes["address"] == [None, "10.2.0.7"]


def test_an_invalid_form_shows_the_errors_and_saves_nothing(sre_client):
    response = sre_client.post(reverse("fleet:host-create"), host_form(address="http://bad"))
    assert response.status_code == 200
    assert "without scheme or port" in response.content.decode()
    assert not GpuHost.objects.exists()


def test_inline_validation_answers_with_the_field_errors_and_saves_nothing(sre_client):
    make_host(name="taken")
    response = sre_client.post(
        reverse("fleet:host-create"),
        {"name": "taken", "address": ""},
        HTTP_X_VALIDATE_ONLY="1",
        **HTMX_HEADERS,
    )
    content = response.content.decode()
    assert 'id="form-fields"' in content and "<html" not in content
    assert "already exists" in content
    assert "This field is required" not in content  # untouched fields stay quiet while typing
    assert GpuHost.objects.count() == 1


def test_editing_a_host_logs_only_the_fields_that_changed(sre_client):
    host = make_host(name="edit-me", rack="r1")
    data = host_form(
        name="edit-me",
        address=host.address,
        rack="r9",
        tags="",
        datacenter=host.datacenter,
        cpu_cores=host.cpu_cores,
        ram_gb=host.ram_gb,
        numa_nodes=host.numa_nodes,
    )
    sre_client.post(reverse("fleet:host-edit", args=[host.pk]), data)
    entry = ChangeLogEntry.objects.for_object(host).get(action="update")
    assert entry.changes == {"rack": ["r1", "r9"]}
    page = sre_client.get(host.get_absolute_url()).content.decode()
    assert "Change log" in page and "r9" in page


def test_an_instance_form_rejects_gpus_that_do_not_match_the_parallel_size(sre_client):
    host = make_host()
    gpus = [make_gpu(host, index=i) for i in range(2)]
    data = instance_form_data(host, name="vllm-x", gpus=[g.pk for g in gpus], base_url="http://10.0.0.9:8000")
    response = sre_client.post(reverse("fleet:instance-create"), data)
    assert "1 x 1 = 1" in response.content.decode()
    assert not Instance.objects.exists()
    data["tensor_parallel_size"] = 2
    assert sre_client.post(reverse("fleet:instance-create"), data).status_code == 302
    assert set(Instance.objects.get().gpus.all()) == set(gpus)


def test_deleting_a_host_first_asks_and_lists_what_goes_with_it(sre_client):
    host = make_host(name="doomed")
    gpu = make_gpu(host)
    make_instance(host, name="vllm-doomed", gpus=[gpu])
    page = sre_client.get(reverse("fleet:host-delete", args=[host.pk])).content.decode()
    assert "vllm-doomed" in page and f"{host.name}/gpu0" in page
    assert GpuHost.objects.exists()


def test_deleting_a_host_removes_its_gpus_and_instances_and_logs_each(sre_client):
    host = make_host(name="doomed")
    gpu = make_gpu(host)
    instance = make_instance(host, gpus=[gpu])
    response = sre_client.post(reverse("fleet:host-delete", args=[host.pk]))
    assert response.status_code == 302
    assert not GpuHost.objects.exists() and not Gpu.objects.exists() and not Instance.objects.exists()
    deleted = set(ChangeLogEntry.objects.filter(action="delete").values_list("object_repr", flat=True))
    assert deleted == {"doomed", str(gpu), instance.name}


def test_the_csrf_token_rides_on_every_htmx_request(sre_client):
    content = sre_client.get(reverse("fleet:host-list")).content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in content


def test_htmx_requests_pass_csrf_with_the_header_from_the_page(cast):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.sre)
    page = client.get(reverse("fleet:host-create"))
    token = page.cookies["csrftoken"].value
    refused = client.post(reverse("fleet:host-create"), host_form(), **HTMX_HEADERS)
    accepted = client.post(reverse("fleet:host-create"), host_form(), HTTP_X_CSRFTOKEN=token, **HTMX_HEADERS)
    assert refused.status_code == 403 and accepted.status_code == 302


def _gpu_choices(html: str) -> set[str]:
    """The option values of the form's GPU select (other selects hold other pks)."""
    select = html[html.index('name="gpus"') :]
    select = select[: select.index("</select>")]
    return set(re.findall(r'value="(\d+)"', select))


def test_the_instance_form_offers_only_the_gpus_of_the_chosen_host(sre_client):
    host, other = make_host(), make_host()
    mine = make_gpu(host)
    theirs = make_gpu(other)
    page = sre_client.get(reverse("fleet:instance-create"), {"host": host.pk}).content.decode()
    assert _gpu_choices(page) == {str(mine.pk)}
    swapped = sre_client.post(
        reverse("fleet:instance-create"), {"host": other.pk}, HTTP_X_VALIDATE_ONLY="1", **HTMX_HEADERS
    ).content.decode()
    assert _gpu_choices(swapped) == {str(theirs.pk)}


def test_an_sre_adds_a_gpu_whose_memory_comes_from_the_catalogue(sre_client):
    host = make_host()
    data = {
        "host": host.pk,
        "index": 0,
        "model": "l40s",
        "form_factor": "pcie",
        "numa_node": 1,
        "pci_bus_id": "00000000:17:00.0",
        "nvlink_peers": "",
        "mig_mode": "disabled",
    }
    response = sre_client.post(reverse("fleet:gpu-create"), data)
    gpu = Gpu.objects.get()
    assert response.status_code == 302 and gpu.memory_mib == 46068


def test_an_sre_adds_a_gateway_in_front_of_instances_and_deletes_it(sre_client):
    from fleet.models import Gateway

    instance = make_instance(make_host())
    data = {"name": "edge", "kind": "nginx", "url": "https://llm.example.com/", "instances": [instance.pk]}
    assert sre_client.post(reverse("fleet:gateway-create"), data).status_code == 302
    gateway = Gateway.objects.get()
    assert gateway.url == "https://llm.example.com" and list(gateway.instances.all()) == [instance]
    page = sre_client.get(reverse("fleet:gateway-delete", args=[gateway.pk])).content.decode()
    assert "Nothing else depends on it" in page
    sre_client.post(reverse("fleet:gateway-delete", args=[gateway.pk]))
    assert not Gateway.objects.exists() and Instance.objects.exists()


def _links(content: str) -> list[str]:
    """The hrefs of the sort and page links as the page writes them (HTML-unescaped)."""
    found = re.findall(r'<a (?:class="[^"]*" )?href="(\?[^"]*)"[^>]*hx-get="(\?[^"]*)"', content)
    return [href.replace("&amp;", "&") for href, hx in found if href == hx]


@pytest.mark.parametrize("url_name", LIST_URLS)
def test_every_sort_and_page_link_is_a_plain_query_string_that_works(viewer_client, url_name):
    host = make_host(name="links-host")
    for i in range(30):
        if url_name == "fleet:gpu-list":
            make_gpu(host, index=i)
        if url_name == "fleet:host-list":
            make_host(name=f"node-{i:02d}")
        if url_name == "fleet:instance-list":
            make_instance(host, name=f"inst-{i:02d}", base_url=f"http://10.0.0.1:{8000 + i}")
        if url_name == "fleet:gateway-list":
            make_gateway(name=f"gw-{i:02d}")
    url = reverse(url_name)
    content = viewer_client.get(url).content.decode()
    links = _links(content)
    assert links and all(link.startswith("?") and not link.startswith("??") for link in links), links
    for link in links:
        response = viewer_client.get(url + link)
        assert response.status_code == 200, link
    descending = next(link for link in links if "sort=-" in link)
    assert 'aria-sort="descending"' in viewer_client.get(url + descending).content.decode()
    next_page = next(link for link in _links(content) if "page=2" in link)
    assert "Page 2 of 2" in viewer_client.get(url + next_page).content.decode()


# Sharing a base URL or GPUs


OVERRIDE_BOX = 'name="allow_shared"'


def test_the_instance_form_refuses_a_base_url_another_instance_serves_until_told_it_is_on_purpose(sre_client):
    host = make_host()
    make_instance(host, name="vllm-b", base_url="http://10.0.0.5:8000")
    assert OVERRIDE_BOX not in sre_client.get(reverse("fleet:instance-create")).content.decode()
    refused = sre_client.post(
        reverse("fleet:instance-create"), instance_form_data(host, base_url="HTTP://10.0.0.5:8000/")
    )
    content = refused.content.decode()
    assert refused.status_code == 200 and "vllm-b already serves http://10.0.0.5:8000." in content
    assert OVERRIDE_BOX in content and "Save anyway (shared on purpose)" in content
    assert not Instance.objects.filter(name="vllm-new").exists()
    data = instance_form_data(host, base_url="HTTP://10.0.0.5:8000/", allow_shared="on")
    assert sre_client.post(reverse("fleet:instance-create"), data).status_code == 302
    assert Instance.objects.filter(name="vllm-new").exists()


def test_the_instance_form_refuses_a_gpu_another_instance_uses(sre_client):
    host = make_host(name="node-a")
    gpu = make_gpu(host, index=0)
    make_instance(host, name="vllm-b", gpus=[gpu])
    data = instance_form_data(host, gpus=[gpu.pk])
    content = sre_client.post(reverse("fleet:instance-create"), data).content.decode()
    assert "node-a/gpu0 is already used by vllm-b." in content and OVERRIDE_BOX in content
    assert not Instance.objects.filter(name="vllm-new").exists()
    assert (
        sre_client.post(reverse("fleet:instance-create"), {**data, "allow_shared": "on"}).status_code == 302
    )
    assert list(Instance.objects.get(name="vllm-new").gpus.all()) == [gpu]


def test_inline_validation_offers_the_override_while_typing(sre_client):
    host = make_host()
    make_instance(host, name="vllm-b", base_url="http://10.0.0.5:8000")
    response = sre_client.post(
        reverse("fleet:instance-create"),
        {"host": host.pk, "base_url": "http://10.0.0.5:8000"},
        HTTP_X_VALIDATE_ONLY="1",
        **HTMX_HEADERS,
    )
    content = response.content.decode()
    assert "<html" not in content and "vllm-b already serves" in content and OVERRIDE_BOX in content


def test_editing_an_instance_shared_on_purpose_does_not_ask_again_for_the_same_sharing(sre_client):
    host = make_host()
    gpus = [make_gpu(host, index=i) for i in range(2)]
    make_instance(host, name="vllm-b", base_url="http://10.0.0.5:8000", gpus=gpus[:1])
    mine = make_instance(host, name="vllm-a", base_url="http://10.0.0.5:8000", gpus=gpus[:1])
    edit = reverse("fleet:instance-edit", args=[mine.pk])
    data = instance_form_data(host, name="vllm-a", gpus=[gpus[0].pk], max_model_len=4096)
    assert sre_client.post(edit, data).status_code == 302
    mine.refresh_from_db()
    assert mine.max_model_len == 4096
    make_instance(host, name="vllm-c", base_url="http://10.0.0.6:8000", gpus=gpus[1:])
    moved = sre_client.post(edit, {**data, "base_url": "http://10.0.0.6:8000"}).content.decode()
    assert "vllm-c already serves http://10.0.0.6:8000." in moved and "vllm-b" not in moved.split("<form")[1]


# Labels


def test_the_saved_message_spells_the_kind_as_written(sre_client):
    response = sre_client.post(reverse("fleet:host-create"), host_form(name="gpu-a100-01"), follow=True)
    assert "GPU host gpu-a100-01 added." in response.content.decode()
    host = GpuHost.objects.get()
    data = host_form(name="gpu-a100-01", rack="r2")
    response = sre_client.post(reverse("fleet:host-edit", args=[host.pk]), data, follow=True)
    content = response.content.decode()
    assert "GPU host gpu-a100-01 saved." in content and "Gpu host" not in content


@pytest.mark.parametrize(
    ("url_name", "label", "raw"),
    [
        ("fleet:host-create", "CPU cores", "Cpu cores"),
        ("fleet:gpu-create", "PCI bus ID", "PCI bus id"),
        ("fleet:instance-create", "GPU memory utilization", "Gpu memory"),
    ],
)
def test_form_labels_spell_acronyms_in_capitals(sre_client, url_name, label, raw):
    content = sre_client.get(reverse(url_name)).content.decode()
    assert label in content and raw not in content


def test_the_enabled_filter_is_any_enabled_or_disabled_and_defaults_to_any(viewer_client):
    host = make_host()
    make_instance(host, name="on-a")
    make_instance(host, name="off-a", enabled=False)
    content = viewer_client.get(reverse("fleet:instance-list")).content.decode()
    select = content[content.index('name="enabled"') :].split("</select>")[0]
    assert re.findall(r"<option[^>]*>([^<]*)</option>", select) == ["Any", "Enabled", "Disabled"]
    assert re.search(r'<option value=""\s+selected>Any', select)
    assert "Unknown" not in select and "on-a" in content and "off-a" in content
    disabled = viewer_client.get(reverse("fleet:instance-list"), {"enabled": "false"}).content.decode()
    assert "off-a" in disabled and "on-a" not in disabled
    enabled = viewer_client.get(reverse("fleet:instance-list"), {"enabled": "true"}).content.decode()
    assert "on-a" in enabled and "off-a" not in enabled
