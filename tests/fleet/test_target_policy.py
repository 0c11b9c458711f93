"""Probe targets: inference servers on private and loopback addresses, never the cloud's
metadata service, a link-local address, the console itself, or a URL with credentials;
refused wherever a URL is saved (form, API, import) with the reason."""

from __future__ import annotations

from textwrap import dedent

import pytest
from django.urls import reverse

from fleet.inventory_io import plan_import
from fleet.models import Instance
from fleet.target_policy import Policy, TargetRefused, policy
from tests.factories import instance_form_data, make_host

CONSOLE = Policy(console_port=8000, console_names=frozenset({"console.example.com"}))


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.170.2/v2/credentials",
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:a9fe:a9fe]/",  # the same, written in hex
        "http://[64:ff9b::a9fe:a9fe]/",  # through the NAT64 prefix
        "http://[2002:a9fe:a9fe::1]/",  # 6to4 carrying it
        "http://[fd00:ec2::254]/",
        "http://100.100.100.200/",
        "http://169.254.10.20:8000",  # any link-local address
        "http://[fe80::1]:8000",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://0.0.0.0:8001",  # Linux connects this to the machine itself
        "http://[::]:8001",
        "http://224.0.0.1:8000",
        "http://240.0.0.1:8000",
        "http://127.0.0.1:8000/admin/",  # the console itself
        "http://[::1]:8000/",
        "http://127.0.0.2:8000/",
        "https://console.example.com/v1",  # a name the console is served under
        "http://user:secret@10.0.0.5:8000",  # credentials in the URL
        "http://:secret@10.0.0.5:8000",
    ],
)
def test_metadata_link_local_the_console_itself_and_credentials_are_refused(url):
    with pytest.raises(TargetRefused):
        CONSOLE.check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.5:8000",
        "http://172.16.3.4:8000",
        "http://192.168.1.20:11434",
        "http://[fd12:3456::5]:8000",
        "http://127.0.0.1:8101",  # loopback on another port: a simulated or local engine
        "http://localhost:8101",
        "https://llm.example.com/v1",
        "http://gpu-01.dc1.example.com:8000",  # a name that does not resolve here passes
    ],
)
def test_inference_servers_on_private_and_loopback_addresses_are_allowed(url):
    CONSOLE.check_url(url, resolve=True)


def test_a_name_is_judged_by_the_addresses_it_resolves_to():
    with pytest.raises(TargetRefused, match="this console itself"):
        CONSOLE.check_url("http://localhost:8000/", resolve=True)
    # 2852039166 is 169.254.169.254 as one number: not an address literal to ipaddress,
    # but the resolver reads it as one.
    with pytest.raises(TargetRefused, match="169.254.169.254"):
        CONSOLE.check_url("http://2852039166/", resolve=True)


def test_the_deny_list_refuses_and_the_allow_list_keeps_probes_inside_it():
    import ipaddress

    lists = Policy(
        deny=(ipaddress.ip_network("10.9.0.0/16"),),
        allow=(ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("169.254.0.0/16")),
    )
    lists.check_url("http://10.1.2.3:8000")
    with pytest.raises(TargetRefused, match="deny list"):
        lists.check_url("http://10.9.2.3:8000")
    with pytest.raises(TargetRefused, match="allow list"):
        lists.check_url("http://192.168.0.4:8000")
    with pytest.raises(TargetRefused, match="metadata"):  # no list lets metadata through
        lists.check_url("http://169.254.169.254/")
    with pytest.raises(TargetRefused, match="link-local"):
        lists.check_url("http://169.254.7.7/")


def test_the_policy_takes_its_lists_and_the_console_s_names_from_settings(settings):
    settings.PORT = 8123
    settings.ALLOWED_HOSTS = ["localhost", "127.0.0.1", "ops.example.com"]
    settings.PROBE_DENY_NETWORKS = ["10.66.0.0/16"]
    settings.PROBE_ALLOW_NETWORKS = []
    current = policy()
    assert current.console_port == 8123 and "ops.example.com" in current.console_names
    assert "localhost" not in current.console_names  # loopback names are judged by port
    with pytest.raises(TargetRefused):
        current.check_url("http://10.66.1.1:8000")
    settings.PROBE_DENY_NETWORKS = ["not-a-network"]
    with pytest.raises(ValueError, match="PROBE_DENY_NETWORKS: 'not-a-network'"):
        policy()


def test_a_refusal_reads_in_chinese_too():
    from django.utils import translation

    with pytest.raises(TargetRefused) as refused:
        CONSOLE.check_url("http://169.254.169.254/")
    with translation.override("zh-hans"):
        assert "169.254.169.254" in refused.value.message.translated()
        assert refused.value.message.translated() != str(refused.value)


# Wherever a URL is saved


@pytest.mark.django_db
def test_the_instance_form_refuses_the_metadata_address_and_saves_nothing(sre_client):
    host = make_host()
    data = instance_form_data(host, name="vllm-x", base_url="http://[::ffff:169.254.169.254]:80")
    page = sre_client.post(reverse("fleet:instance-create"), data).content.decode()
    assert "cloud metadata address" in page
    assert not Instance.objects.exists()


@pytest.mark.django_db
def test_the_api_refuses_credentials_in_a_base_url(cast):
    from rest_framework.test import APIClient

    make_host(name="node-a")
    client = APIClient()
    client.force_authenticate(cast.sre)
    response = client.post(
        "/api/instances/",
        {"name": "vllm-x", "host": "node-a", "base_url": "http://u:p@10.1.0.1", "served_model_name": "m"},
        format="json",
    )
    assert response.status_code == 400
    assert "Credentials in a URL" in response.json()["base_url"][0]


@pytest.mark.django_db
def test_an_import_refuses_a_link_local_dcgm_exporter_and_names_the_field():
    text = dedent("""
        hosts:
          - name: node-z
            address: 10.0.0.7
            gpu_telemetry: dcgm
            dcgm_exporter_url: http://169.254.1.1:9400/metrics
    """).lstrip()
    errors = [str(e) for e in plan_import(text=text, fmt="yaml").errors]
    assert any("dcgm_exporter_url" in e and "link-local" in e for e in errors), errors
