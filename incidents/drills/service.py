"""Drills started from the page: a stored run row, a worker that plays the scenario and
records its progress on the row, and the report stored at the end."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from fleet.simulator.scenarios import Scenario, ScenarioError, load_scenario, shipped_scenarios
from incidents.drills.run import run_drill
from incidents.models import DrillRun


def shipped() -> list[tuple[str, Scenario]]:
    """The shipped scenarios that load, by file name."""
    found = []
    for path in shipped_scenarios():
        try:
            found.append((path.name, load_scenario(path)))
        except ScenarioError:
            continue
    return found


def start(*, scenario: str, user: str) -> DrillRun:
    """A pending run of a shipped scenario, queued for a worker; ScenarioError when there is no such one."""
    names = {name for name, _ in shipped()}
    if scenario not in names:
        raise ScenarioError(f"{scenario!r} is not a shipped scenario")
    loaded = load_scenario(scenario)
    run = DrillRun.objects.create(scenario=scenario, total_s=loaded.drill_end_s, created_by=user)
    from incidents.tasks import run_drill as task

    transaction.on_commit(lambda: task.delay(run_id=run.pk))
    return run


def run_stored(*, run_id: int) -> DrillRun:
    run = DrillRun.objects.get(pk=run_id)
    if run.is_finished:
        return run
    run.status = DrillRun.Status.RUNNING
    run.save(update_fields=["status"])

    def progress(elapsed: float, total: float) -> None:
        DrillRun.objects.filter(pk=run.pk).update(elapsed_s=elapsed, total_s=total)

    try:
        report = run_drill(scenario=load_scenario(run.scenario), on_progress=progress)
    except Exception as exc:  # the run row must end, whatever happened
        run.status, run.error = DrillRun.Status.FAILED, f"{type(exc).__name__}: {exc}"[:500]
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
        raise
    run.status, run.report, run.passed = DrillRun.Status.DONE, report.to_dict(), report.passed
    run.elapsed_s, run.finished_at = run.total_s, timezone.now()
    run.save(update_fields=["status", "report", "passed", "elapsed_s", "finished_at"])
    return run
