import json

import pytest
from django.core.management import CommandError, call_command

from tests.fleet.probing import simulated_instances

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_probes_an_instance_and_prints_its_verdict(simulator, quick_settings, capsys):
    (instance,) = simulated_instances(1)
    simulator()
    call_command("probe", instance.name)
    out = capsys.readouterr().out
    assert out.startswith(f"{instance.name} ({instance.base_url}): up")
    assert "ttfb" in out


def test_it_prints_json_with_json(simulator, quick_settings, capsys):
    (instance,) = simulated_instances(1)
    simulator()
    call_command("probe", instance.name, "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "up" and data["result"]["phases"]["status"] == 200


def test_an_unknown_instance_is_a_clear_error(quick_settings):
    with pytest.raises(CommandError, match="no instance named 'nope'"):
        call_command("probe", "nope")


def test_a_refused_instance_is_reported_not_raised(quick_settings, capsys):
    (instance,) = simulated_instances(1)  # nothing listens on its port
    call_command("probe", instance.name)
    out = capsys.readouterr().out
    assert "refused" in out.lower()


def test_kind_probes_that_kind_alone_and_judges_with_the_stored_rest(simulator, quick_settings, capsys):
    (instance,) = simulated_instances(1)
    simulator()
    call_command("probe", instance.name)  # every kind stored
    capsys.readouterr()
    call_command("probe", instance.name, "--kind", "metrics", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["result"]["kinds"] == ["metrics"] and data["result"]["phases"] is None
    assert data["verdict"] == "up"
    call_command("probe", instance.name, "--kind", "health")
    assert "(measured: health; other kinds as stored)" in capsys.readouterr().out


def test_an_unknown_kind_is_refused_before_anything_runs(quick_settings):
    (instance,) = simulated_instances(1)
    with pytest.raises(CommandError, match="invalid choice: 'latency'"):
        call_command("probe", instance.name, "--kind", "latency")
