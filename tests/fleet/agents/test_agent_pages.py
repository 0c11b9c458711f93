"""The agent on the host page: everyone sees whether the host's agent beats; SREs enrol it,
see how to start it and rotate its token; a down instance's page says whether its host is up."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.agent.reports import token_for
from fleet.models import HostAgent, InstanceState
from tests.factories import make_host, make_instance

pytestmark = pytest.mark.django_db


def as_role(client, cast, role):
    client.force_login(cast.for_role(role))
    return client


def panel(client, host) -> str:
    response = client.get(reverse("fleet:host-agent", args=[host.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_host_without_an_agent_explains_what_one_does_and_offers_to_enrol_it(client, cast):
    host = make_host(name="node-a")
    said = panel(as_role(client, cast, "sre"), host)
    assert 'data-condition="no_agent"' in said and "dcgm-exporter" in said
    assert reverse("fleet:host-agent-enroll", args=[host.pk]) in said
    assert reverse("fleet:host-agent-enroll", args=[host.pk]) not in panel(
        as_role(client, cast, "viewer"), host
    )


def test_an_sre_enrols_the_agent_and_sees_how_to_start_it_a_viewer_never_sees_the_token(client, cast):
    host = make_host(name="node-a")
    viewer = as_role(client, cast, "viewer")
    assert viewer.post(reverse("fleet:host-agent-enroll", args=[host.pk])).status_code == 403
    sre_client = as_role(client, cast, "sre")
    response = sre_client.post(reverse("fleet:host-agent-enroll", args=[host.pk]))
    assert response.status_code == 302 and response.url.endswith("#agent")
    token = token_for(HostAgent.objects.get(host=host))
    said = panel(sre_client, host)
    assert token in said and "systemctl enable --now ops-agent.service" in said
    assert 'data-condition="agent_missing"' in said and "never reported" in said
    assert token not in panel(as_role(client, cast, "viewer"), host)


def test_a_new_token_revokes_the_old_one(sre_client):
    host = make_host(name="node-a")
    agent = HostAgent.objects.create(host=host)
    old = token_for(agent)
    sre_client.post(reverse("fleet:host-agent-rotate", args=[host.pk]))
    assert token_for(HostAgent.objects.get(host=host)) != old


def test_the_panel_shows_the_heartbeat_and_what_the_agent_can_read(viewer_client):
    host = make_host(name="node-a")
    HostAgent.objects.create(
        host=host,
        last_heartbeat_at=timezone.now() - timedelta(seconds=8),
        hostname="gpu-node-a.dc1",
        pid=4242,
        agent_version="1",
        capabilities={"nvml": False, "nvml_error": "NVML Shared Library Not Found", "docker_socket": True},
    )
    said = panel(viewer_client, host)
    assert 'data-condition="agent_up"' in said
    assert "gpu-node-a.dc1" in said and "NVML Shared Library Not Found" in said


def _down(instance, code):
    InstanceState.objects.create(
        instance=instance,
        since=timezone.now(),
        verdict="down",
        findings=[{"code": code, "severity": "down", "category": "network", "evidence": "x"}],
    )


def test_a_down_instance_on_a_live_host_says_the_host_is_up(viewer_client):
    host = make_host(name="node-a")
    instance = make_instance(host, name="vllm-a")
    _down(instance, "connect.refused")
    HostAgent.objects.create(host=host, last_heartbeat_at=timezone.now())
    said = viewer_client.get(reverse("fleet:instance-state", args=[instance.pk])).content.decode()
    assert "instance down, host up" in said and 'data-host-up="true"' in said


def test_a_down_instance_on_a_dead_host_says_the_host_is_down(viewer_client):
    host = make_host(name="node-a")
    instance = make_instance(host, name="vllm-a")
    _down(instance, "connect.timeout")
    HostAgent.objects.create(host=host, last_heartbeat_at=timezone.now() - timedelta(minutes=10))
    said = viewer_client.get(reverse("fleet:instance-state", args=[instance.pk])).content.decode()
    assert "the host is down, not only the instance" in said and 'data-host-up="false"' in said


def test_the_overview_flags_a_host_whose_agent_is_missing_and_a_host_that_is_down(viewer_client):
    quiet, dead, fine = make_host(name="node-a"), make_host(name="node-b"), make_host(name="node-c")
    answering = make_instance(quiet, name="vllm-a")
    InstanceState.objects.create(instance=answering, since=timezone.now(), verdict="up")
    _down(make_instance(dead, name="vllm-b"), "connect.timeout")
    make_instance(fine, name="vllm-c")
    long_ago = timezone.now() - timedelta(minutes=10)
    HostAgent.objects.create(host=quiet, last_heartbeat_at=long_ago)
    HostAgent.objects.create(host=dead, last_heartbeat_at=long_ago)
    HostAgent.objects.create(host=fine, last_heartbeat_at=timezone.now())
    page = viewer_client.get(reverse("fleet:overview")).content.decode()
    assert page.count('data-condition="agent_missing"') == 1 and page.count('data-condition="host_down"') == 1
    assert 'data-condition="agent_up"' not in page  # a beating agent is not news
