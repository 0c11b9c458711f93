"""Started from an instance, the walkthrough takes the answers its latest probes give: with a
fault injected in the real simulator and the instance probed the way the schedule does, the
first question of a tree is answered from the probes' evidence, the walk moves on, and the
engineer can still choose otherwise."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from diagnostics.trees.model import load
from diagnostics.trees.walk import Facts, walk
from fleet import probe_service
from fleet.models import InstanceState
from tests.fleet.probing import simulated_instances

EVERY_KIND = ("health", "stream", "metrics", "gpu")


@pytest.fixture
def faulted(simulator, quick_settings, cast, client):
    """Three probed instances: one refusing connections, one with an Xid, one with a backlog."""
    refusing, xid, backlog = simulated_instances(3)
    sim = simulator()
    sim.inject(refusing.name, {"kind": "refuse_connections"})
    sim.wait_listening(refusing.name, listening=False)
    sim.inject(xid.name, {"kind": "gpu_xid"})
    sim.inject(backlog.name, {"kind": "queue_backlog", "n": 200})
    for kind in EVERY_KIND:
        probe_service.run_cycle(kind=kind)
    client.force_login(cast.engineer)
    return {"refuse_connections": refusing, "gpu_xid": xid, "queue_backlog": backlog}


def _page(client, tree_id, instance, **params) -> str:
    url = reverse("diagnostics:walkthrough", args=[tree_id])
    return html.unescape(client.get(url, {"instance": instance.pk, **params}).content.decode())


def _first_step(page: str) -> str:
    return page.split('<li class="step answered', 2)[1].split("</li>", 1)[0]


@pytest.mark.django_db(transaction=True)
def test_a_refused_connection_answers_the_first_question_of_the_guide_and_the_walk_moves_on(faulted, client):
    instance = faulted["refuse_connections"]
    response = client.get(reverse("diagnostics:troubleshoot-instance", args=[instance.pk]), follow=True)
    page = html.unescape(response.content.decode())
    first = _first_step(page)
    assert "What does the user see?" in first and '<span class="badge ok">probe</span>' in first
    assert "Requests return an error" in first
    assert f"answered from {instance.name}'s probes:" in first and "Connection refused" in first
    guide = load()["guide"]
    assert guide.node("conn_process").question in page  # refused, nothing listens: is it running?
    assert "Not what you see? change this answer" in first
    slow = f"/troubleshoot/guide/?path=2&amp;instance={instance.pk}"
    assert slow.replace("&amp;", "&") in page  # the override: requests are slow instead


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("fault", "tree_id", "answer", "evidence"),
    [
        ("refuse_connections", "timeouts", "Connecting fails or takes over 1 s", "Connection refused"),
        ("gpu_xid", "cuda", "Xid errors in the kernel log", "XID 79"),
        (
            "queue_backlog",
            "rate_limiting",
            "No error, but the engine's waiting queue grows",
            "requests waiting",
        ),
    ],
)
def test_the_first_question_of_each_tree_is_answered_from_the_probes(
    faulted, client, fault, tree_id, answer, evidence
):
    instance = faulted[fault]
    first = _first_step(_page(client, tree_id, instance))
    start = load()[tree_id].node(load()[tree_id].start)
    assert start.question in first and answer in first
    assert f"answered from {instance.name}'s probes:" in first and evidence in first


@pytest.mark.django_db(transaction=True)
def test_the_engineer_s_answer_wins_over_the_probes(faulted, client):
    instance = faulted["refuse_connections"]
    page = _page(client, "guide", instance, path="2")
    first = _first_step(page)
    assert '<span class="badge">you</span>' in first and "Requests succeed but are slow" in first
    assert "(the probes suggested another answer)" in first
    state = InstanceState.objects.get(instance=instance)
    assert state.findings[0]["code"] == "connect.refused"


def _facts(*findings, measured=("health", "stream", "metrics", "gpu")):
    return Facts(findings=list(findings), measured=set(measured), instance_name="chat-a")


def test_kv_pressure_answers_the_first_question_of_the_oom_tree():
    pressure = {"code": "kv.pressure", "category": "oom.kv_pressure", "source": "metrics",
                "evidence": "KV cache 97% used > 90% with 14 waiting"}  # fmt: skip
    step = walk(load(), "oom", [], _facts(pressure)).steps[0]
    assert step.by == "probe" and step.answer.answer.startswith("No error: requests wait")
    assert step.evidence == pressure["evidence"]


def test_a_full_kv_cache_with_nothing_waiting_answers_nothing():
    high = {"code": "kv.high", "category": "oom.kv_pressure", "source": "metrics",
            "evidence": "KV cache 99% used > 90%, with nothing waiting and nothing preempted"}  # fmt: skip
    assert walk(load(), "oom", [], _facts(high)).steps == []


def test_an_engine_that_answers_500_is_an_error_of_http_5xx_not_a_refused_connection():
    unhealthy = {"code": "health.http_500", "category": "server.5xx", "source": "readiness",
                 "evidence": "/health returned 500"}  # fmt: skip
    steps = walk(load(), "guide", [], _facts(unhealthy)).steps
    assert [s.node.id for s in steps[:2]] == ["symptom", "error_code"]
    assert steps[1].answer.answer == "HTTP 500, 502 or 503"


def test_the_probe_kinds_measured_come_from_the_stored_kinds_not_their_labels(db):
    from diagnostics.views.troubleshoot import _facts as facts_for
    from tests.factories import make_host, make_instance

    instance = make_instance(make_host())
    InstanceState.objects.create(instance=instance, kinds={"health": {"at": "2026-01-01T00:00:00+00:00"}})
    instance.refresh_from_db()
    assert facts_for(instance).measured == {"health"}
