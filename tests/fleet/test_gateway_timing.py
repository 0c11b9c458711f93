"""The health probe also times the one-token request through the gateway in front of an
instance, so the TTFT breakdown's gateway gap is measured, over real sockets through the
simulated nginx-like gateway."""

from __future__ import annotations

import pytest

from fleet import probe_service
from fleet.models import Instance, InstanceState
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.gateway import gateway_specs_from_inventory
from fleet.simulator.spec import specs_from_inventory
from fleet.ttft_service import breakdown_for
from tests.factories import make_gateway
from tests.fleet.probing import free_ports, simulated_instances

pytestmark = pytest.mark.django_db(transaction=True)


def _running(gateway_latency_s: float):
    specs = specs_from_inventory()
    gateways, _notes = gateway_specs_from_inventory(s.name for s in specs)
    sim = SimulatorThread(specs, gateways=gateways)
    sim.__enter__()
    sim.set_gateway("edge", added_latency_s=gateway_latency_s)
    return sim


def test_the_health_probe_times_the_request_through_the_gateway_too(quick_settings):
    (instance,) = simulated_instances(1)
    (port,) = free_ports(1)
    make_gateway(name="edge", url=f"http://127.0.0.1:{port}", instances=[instance])
    sim = _running(gateway_latency_s=0.3)
    try:
        probe_service.run_cycle(kind="health")
    finally:
        sim.stop()
    health = InstanceState.objects.get(instance=instance).kind_result("health")
    direct, through = health["phases"], health["gateway_phases"]
    assert (direct["outcome"], through["outcome"]) == ("ok", "ok")
    assert through["url"].startswith(f"http://127.0.0.1:{port}/v1/chat/completions")
    assert through["ttfb_s"] > direct["ttfb_s"] + 0.25
    gap = next(
        p for p in breakdown_for(Instance.objects.get(pk=instance.pk)).breakdown.parts if p.key == "gateway"
    )
    assert gap.status == "measured" and gap.seconds == pytest.approx(through["ttfb_s"] - direct["ttfb_s"])


def test_a_gateway_that_refuses_is_a_failed_timing_not_a_failed_instance(quick_settings):
    (instance,) = simulated_instances(1)
    (port,) = free_ports(1)
    make_gateway(name="edge", url=f"https://127.0.0.1:{port}", instances=[instance])  # nothing listens
    sim = SimulatorThread(specs_from_inventory())
    sim.__enter__()
    try:
        probe_service.run_cycle(kind="health")
    finally:
        sim.stop()
    state = InstanceState.objects.get(instance=instance)
    assert state.verdict == "up"
    assert state.kind_result("health")["gateway_phases"]["outcome"] != "ok"
    gap = next(
        p for p in breakdown_for(Instance.objects.get(pk=instance.pk)).breakdown.parts if p.key == "gateway"
    )
    assert gap.status == "not_measured" and "got no answer" in str(gap.note)


def test_an_instance_the_inventory_reaches_through_its_gateway_is_timed_once(quick_settings):
    (instance,) = simulated_instances(1)
    make_gateway(name="edge", url=instance.base_url, instances=[instance])
    target = probe_service.target_for(Instance.objects.prefetch_related("gateways").get(pk=instance.pk))
    assert (target.gateway, target.gateway_url, target.through_gateway) == ("edge", "", True)
