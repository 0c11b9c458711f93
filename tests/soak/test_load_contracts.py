"""What the soak sends is what the console and the simulator take: its Alertmanager payloads
pass the receiver's checks, its faults the simulator's, its inventory the importer's."""

import json
import random

import pytest

from fleet.inventory_io import plan_import
from fleet.simulator.faults import FAULT_KINDS, parse_fault
from incidents.alertmanager_payload import parse
from soak.alert_load import AlertLoad, _payload
from soak.fault_driver import FAULTS
from soak.inventory import instance_names, inventory_text


def test_every_payload_the_soak_sends_is_a_valid_webhook():
    load = AlertLoad(
        base_url="http://x", token="t", rate=5, groups=3, alerts_per_group=60, instance_names=["i"]
    )
    for group, pool in enumerate(load._pools):
        chosen = random.Random(group).sample(pool, 50)
        webhook = parse(body=json.dumps(_payload(group, chosen)).encode())
        assert {a.fingerprint for a in webhook.alerts} == {a.fingerprint for a in chosen}
        assert webhook.group_key


def test_a_group_keeps_its_fingerprints_to_itself():
    load = AlertLoad(
        base_url="http://127.0.0.1:1", token="t", rate=5, groups=4, alerts_per_group=25, instance_names=[]
    )
    fingerprints = [a.fingerprint for pool in load._pools for a in pool]
    assert len(fingerprints) == len(set(fingerprints)) == 100


def test_the_fault_driver_covers_every_kind_the_simulator_knows():
    assert set(FAULTS) == {str(kind) for kind in FAULT_KINDS}


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_each_fault_the_driver_sets_is_one_the_simulator_takes(kind):
    fault = parse_fault({"kind": kind, **FAULTS[kind], "duration_s": 30}, now=0.0)
    assert fault.expires_at == 30


@pytest.mark.django_db
def test_the_inventory_of_n_instances_imports_whole():
    plan = plan_import(text=inventory_text(count=20, base_port=12000), fmt="yaml")
    assert plan.ok, plan.errors
    names = {record.values["name"] for record in plan.records if record.kind == "instance"}
    assert names == set(instance_names(20))
