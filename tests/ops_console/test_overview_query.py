"""The overview counts in SQL what the console shows (fleet.shown_state) for every instance:
the SQL expression agrees with the Python rule the home page uses
(ops_console.home.with_shown_state), case by case. The SQL is written once for SQLite and
PostgreSQL alike, so these run on the embedded default too."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from diagnostics.models import CapacityFinding
from fleet.models import HostAgent, Instance, InstanceState
from fleet.probe_service import stale_after
from ops_console.home import with_shown_state
from ops_console.overview_query import Scope, host_rows, noisy_tiles, open_capacity, shown_states, tile_page
from ops_console.schedules import probe_intervals
from tests.factories import make_host, make_instance

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

FINDING = {"code": "metrics.missing", "category": "x", "severity": "info", "evidence": "no hit rate"}


def _scope() -> Scope:
    return Scope(now=timezone.now(), stale_after=stale_after(probe_intervals())["health"])


def test_the_sql_shown_state_is_the_python_one_for_every_kind_of_instance():
    now = timezone.now()
    window = stale_after(probe_intervals())["health"]
    fresh, old = now - timedelta(seconds=5), now - window - timedelta(seconds=5)
    host, covered_host = make_host(), make_host()
    cases = []
    for verdict in ("up", "degraded", "failing", "down", "unknown"):
        for probed in (fresh, old, None):
            for enabled in (True, False):
                cases.append((host, verdict, probed, enabled))
    cases += [(covered_host, "down", fresh, True), (host, None, None, True), (host, "up", old, True)]
    covered_instance = None
    for index, (on, verdict, probed, enabled) in enumerate(cases):
        instance = make_instance(on, name=f"case-{index}", enabled=enabled)
        if verdict is not None:
            InstanceState.objects.create(instance=instance, verdict=verdict, last_probe_at=probed)
        covered_instance = instance
    scope = Scope(now=now, stale_after=window, hosts_in_maintenance=frozenset({covered_host.pk}),
                  instances_in_maintenance=frozenset({covered_instance.pk}))  # fmt: skip
    in_sql = shown_states(scope)
    windows = [  # what incidents.maintenance.current_and_upcoming gives: one covers a host, one an instance
        SimpleNamespace(active=True, window=SimpleNamespace(host_id=covered_host.pk, instance_id=None)),
        SimpleNamespace(active=True, window=SimpleNamespace(host_id=None, instance_id=covered_instance.pk)),
    ]
    instances = list(Instance.objects.select_related("host", "state"))
    for instance in with_shown_state(instances, now=now, windows=windows):
        assert in_sql[instance.pk] == instance.shown, (instance.name, instance.shown, in_sql[instance.pk])


def test_each_host_is_counted_per_shown_state_with_its_up_and_quiet_instances_apart():
    host = make_host(name="node-a")
    HostAgent.objects.create(host=host, last_heartbeat_at=timezone.now())
    quiet, noted, sized, down = (make_instance(host, name=f"node-a-{n}") for n in range(4))
    for instance, verdict, findings in ((quiet, "up", []), (noted, "up", [FINDING]), (sized, "up", []),
                                        (down, "down", [FINDING])):  # fmt: skip
        InstanceState.objects.create(
            instance=instance, verdict=verdict, last_probe_at=timezone.now(), findings=findings
        )
    CapacityFinding.objects.create(instance=sized, code="kv", severity="warning", title="KV cache full")
    CapacityFinding.objects.create(instance=quiet, code="kv", severity="info", title="a note")
    drill = make_host(name="drill-a", drill=True)
    InstanceState.objects.create(instance=make_instance(drill), verdict="down", last_probe_at=timezone.now())

    [row] = host_rows(_scope())
    assert (row.name, row.by_state, row.quiet, row.enrolled) == ("node-a", {"up": 3, "down": 1}, 1, True)
    assert row.last_heartbeat_at is not None and row.last_heartbeat_at.tzinfo is not None
    noisy = noisy_tiles(_scope(), host_ids=[host.pk])
    assert [(t.name, t.shown, t.quiet) for t in noisy] == [
        ("node-a-1", "up", False),
        ("node-a-2", "up", False),
        ("node-a-3", "down", False),
    ]
    assert noisy[1].state.findings == [] and noisy[2].state.findings == [FINDING]
    assert [(f.instance_name, f.severity) for f in open_capacity()] == [
        ("node-a-2", "warning"),
        ("node-a-0", "info"),
    ]


def test_a_filter_reads_a_page_of_tiles_by_host_and_name():
    first, second = make_host(name="node-b"), make_host(name="node-a")
    for host in (first, second):
        for n in range(3):
            InstanceState.objects.create(
                instance=make_instance(host, name=f"{host.name}-{n}"),
                verdict="down" if n == 1 else "up",
                last_probe_at=timezone.now(),
            )
    page = tile_page(_scope(), host_ids=None, state="", offset=2, limit=3)
    assert [t.name for t in page] == ["node-a-2", "node-b-0", "node-b-1"]
    down = tile_page(_scope(), host_ids=[first.pk], state="down", offset=0, limit=10)
    assert [(t.name, t.shown) for t in down] == [("node-b-1", "down")]
    assert down[0].state.last_probe_at.tzinfo is not None
