"""What the console accepts from an agent: only reports signed with their host's token,
fresh, of a known kind and a sane size. Anything else changes nothing but the count of
rejected reports."""

from __future__ import annotations

import time

import pytest

from fleet.agent.credentials import sign
from fleet.agent.reports import ReportRefused, receive, token_for
from fleet.models import GpuTelemetry, HostAgent
from tests.factories import make_host

pytestmark = pytest.mark.django_db


@pytest.fixture
def agents():
    return {
        name: HostAgent.objects.create(host=make_host(name=name, gpu_telemetry=GpuTelemetry.NVML))
        for name in ("node-a", "node-b")
    }


def envelope(*, host: str, token: str, kind: str = "heartbeat", body=None, sent_at=None):
    body = {"hostname": "gpu-node-a", "agent_version": "1", "pid": 4242} if body is None else body
    sent_at = round(time.time(), 3) if sent_at is None else sent_at
    signature = sign(token=token, host=host, kind=kind, sent_at=sent_at, body=body)
    return {"host": host, "kind": kind, "sent_at": sent_at, "body": body, "signature": signature}


def test_a_signed_heartbeat_is_stored(agents):
    agent = receive(envelope=envelope(host="node-a", token=token_for(agents["node-a"])))
    assert agent.last_heartbeat_at is not None
    assert (agent.hostname, agent.pid) == ("gpu-node-a", 4242)


def test_a_report_signed_with_another_hosts_token_is_refused_and_counted(agents):
    with pytest.raises(ReportRefused, match="not signed with its agent's token"):
        receive(envelope=envelope(host="node-a", token=token_for(agents["node-b"])))
    agent = HostAgent.objects.get(host__name="node-a")
    assert agent.last_heartbeat_at is None and agent.rejected_reports == 1


def test_a_report_changed_on_the_way_is_refused(agents):
    sent = envelope(host="node-a", token=token_for(agents["node-a"]))
    sent["body"]["pid"] = 1
    with pytest.raises(ReportRefused, match="not signed"):
        receive(envelope=sent)


def test_a_new_salt_revokes_the_old_token(agents):
    old = token_for(agents["node-a"])
    agents["node-a"].token_salt = "fresh-salt"
    agents["node-a"].save()
    with pytest.raises(ReportRefused, match="not signed"):
        receive(envelope=envelope(host="node-a", token=old))


def test_an_old_report_from_a_backlog_is_refused(agents):
    stale = envelope(host="node-a", token=token_for(agents["node-a"]), sent_at=time.time() - 3600)
    with pytest.raises(ReportRefused, match="too old"):
        receive(envelope=stale)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("not a dict", "must be a JSON object"),
        ({"host": "node-a", "kind": "rm -rf", "body": {}, "sent_at": 1}, "a kind of"),
        ({"host": "node-a", "kind": "heartbeat", "body": [], "sent_at": 1}, "a body object"),
        ({"host": "node-a", "kind": "heartbeat", "body": {}, "sent_at": "now"}, "sent_at"),
        ({"host": "nowhere", "kind": "heartbeat", "body": {}, "sent_at": 1}, "no agent is enrolled"),
        (
            {"host": "node-a", "kind": "snapshot", "body": {"x": "y" * 600_000}, "sent_at": 1},
            "passes the limit",
        ),
    ],
)
def test_malformed_reports_say_what_is_wrong(agents, bad, message):
    with pytest.raises(ReportRefused, match=message):
        receive(envelope=bad)


def test_a_gpu_reading_is_checked_before_it_is_kept(agents):
    token = token_for(agents["node-a"])
    receive(envelope=envelope(host="node-a", token=token, kind="gpus", body={"reading": {"gpus": []}}))
    agent = HostAgent.objects.get(host__name="node-a")
    assert agent.gpu_reading is None and "bad reading" in agent.gpu_error
    receive(
        envelope=envelope(host="node-a", token=token, kind="gpus", body={"error": "NVML: driver not loaded"})
    )
    assert HostAgent.objects.get(host__name="node-a").gpu_error == "NVML: driver not loaded"
