"""Walked for an instance, the commands point at it: its base URL, host and port, its model
name and its gateway instead of HOST:8000, MODEL and GATEWAY; walked for no instance they
keep the placeholders."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from diagnostics.trees.commands import Target, fill
from diagnostics.trees.model import load
from tests.factories import make_gateway, make_host, make_instance
from tests.trees.paths import dotted, paths_to_every_node

TARGET = Target(
    base_url="http://10.20.0.7:8010", model="Qwen/Qwen3-8B", gateway_url="https://llm.example.com/"
)


def test_it_fills_the_url_the_port_the_model_and_the_gateway():
    command = (
        "curl -s http://HOST:8000/metrics\nss -tlnp | grep ':8000'\nnc -zv -w 3 SERVER_IP 8000\n"
        """curl -d '{"model":"MODEL"}' http://GATEWAY/v1/chat/completions"""
    )
    assert fill(command, target=TARGET) == (
        "curl -s http://10.20.0.7:8010/metrics\nss -tlnp | grep ':8010'\nnc -zv -w 3 10.20.0.7 8010\n"
        """curl -d '{"model":"Qwen/Qwen3-8B"}' https://llm.example.com/v1/chat/completions"""
    )


def test_it_leaves_what_it_does_not_know_and_a_name_where_an_address_would_be_wrong():
    bare = Target(base_url="https://engine.internal")
    assert fill("curl http://HOST:8000/health -d MODEL", target=bare) == (
        "curl https://engine.internal/health -d MODEL"
    )
    assert fill("dig HOST", target=bare) == "dig engine.internal"
    assert fill("dig HOST", target=TARGET) == "dig HOST"  # an IP is no name to look up
    assert fill("curl http://HOST:8000/", target=None) == "curl http://HOST:8000/"


def test_a_value_that_would_break_the_command_s_quoting_is_not_filled_in():
    assert fill("""-d '{"model":"MODEL"}'""", target=Target(model="it's")) == """-d '{"model":"MODEL"}'"""


@pytest.mark.django_db
def test_every_command_of_every_tree_points_at_the_instance(client, cast):
    client.force_login(cast.viewer)
    instance = make_instance(make_host(), name="chat-a", base_url="http://10.20.0.7:8010")
    make_gateway(instances=[instance], url="https://llm.example.com")
    filled = 0
    for tree in load().values():
        url = reverse("diagnostics:walkthrough", args=[tree.id])
        for node_id, path in paths_to_every_node(tree).items():
            params = {"instance": instance.pk, **({"path": dotted(path)} if path else {})}
            page = html.unescape(client.get(url, params).content.decode())
            node = tree.node(node_id)
            assert "HOST:8000" not in page and "http://GATEWAY" not in page, f"{tree.id}.{node_id}"
            assert '"model":"MODEL"' not in page, f"{tree.id}.{node_id}"
            if "HOST:8000" in node.command:
                assert "http://10.20.0.7:8010/" in page, f"{tree.id}.{node_id}"
                filled += 1
    assert filled >= 10


@pytest.mark.django_db
def test_the_first_question_of_the_guide_shows_the_instance_s_health_url(client, cast):
    client.force_login(cast.viewer)
    instance = make_instance(make_host(), name="chat-a", base_url="http://10.20.0.7:8010")
    response = client.get(reverse("diagnostics:troubleshoot-instance", args=[instance.pk]), follow=True)
    page = response.content.decode()
    assert "http://10.20.0.7:8010/health" in page and "HOST:8000" not in page
    assert "Commands point at chat-a (http://10.20.0.7:8010)." in page


@pytest.mark.django_db
def test_without_an_instance_the_placeholders_stay(client, cast):
    client.force_login(cast.viewer)
    assert (
        "http://HOST:8000/health"
        in client.get(reverse("diagnostics:walkthrough", args=["guide"])).content.decode()
    )
