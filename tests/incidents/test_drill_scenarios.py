"""Every shipped scenario, replayed as a drill with --check: the console's probes and alert
rules give the verdicts and incidents its expectations state (the truth table), the guide's
03:00 case (KV pressure, then the container killed: two incidents, never a GPU OOM) and
14:00 case (a batch surge: the engine's queue) among them. Drills of a
minute or more of real time are marked slow (-m "not slow" leaves them out)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from fleet.models import GpuHost
from fleet.simulator.scenarios import load_scenario, shipped_scenarios
from incidents.models import Incident

# The drill probes from threads; its waiting is real time, so `make test` runs this file in
# a second pytest process beside the rest of the suite (-m drill, its own database and broker).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.drill]

SLOW_REAL_S = 45


def _param(path):
    scenario = load_scenario(path)
    slow = scenario.real_seconds(scenario.drill_end_s) > SLOW_REAL_S
    return pytest.param(path.name, id=path.stem, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("name", [_param(p) for p in shipped_scenarios()])
def test_the_drill_meets_every_expectation_of_the_scenario(name, capsys):
    try:
        call_command("drill", name, "--check")
    except CommandError as exc:
        pytest.fail(f"{name}: {exc}", pytrace=False)
    assert "PASSED" in capsys.readouterr().out
    assert not GpuHost.objects.filter(drill=True).exists()  # the scratch inventory is gone
    assert not Incident.objects.exists()  # and so are its incidents
