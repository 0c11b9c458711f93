"""A drill's report as text: the verdict timeline, the incidents with their timelines, and
each expectation met or not."""

from __future__ import annotations

from fleet.simulator.scenarios import Scenario
from incidents.drills.run import DrillReport


def report_text(report: DrillReport, *, scenario: Scenario) -> str:
    at = scenario.clock_label
    lines = [
        f"Drill {report.scenario}: {report.duration_s:g} scenario seconds at time scale "
        f"{report.time_scale:g} (probe cycles every {report.probe_interval_s:g} s), "
        f"{report.real_s:.1f} s real",
        "",
        "Timeline",
    ]
    events = [(e["at_s"], f"  {at(e['at_s'])}  event     {e['summary']}") for e in report.events]
    verdicts = [
        (o.at_s, f"  {at(o.at_s)}  {o.instance:<20} {o.describe()}") for o in report.verdict_changes()
    ]
    lines += [line for _, line in sorted(events + verdicts, key=lambda pair: pair[0])]
    lines += ["", f"Incidents ({len(report.incidents)})"]
    for incident in report.incidents:
        scope = "host " if incident.host else ""
        lines.append(
            f"  {at(incident.opened_at_s)}  {scope}{incident.category} on {', '.join(incident.instances)}"
            f" [{incident.status}, fired {incident.fired}x]: {incident.title}"
        )
        lines += [f"      {at(e.at_s)}  {e.kind:<14} {e.text}" for e in incident.timeline]
    if report.results:
        lines += ["", "Expectations"]
        lines += [
            f"  {'ok  ' if r.ok else 'FAIL'}  {r.message if not r.ok else r.expectation}"
            for r in report.results
        ]
    if report.errors:
        lines += ["", "Errors", *(f"  {e}" for e in report.errors)]
    if report.kept_hosts:
        lines += ["", f"Kept for inspection: {', '.join(report.kept_hosts)}"]
    lines += ["", "PASSED" if report.passed else f"FAILED: {len(report.unmet)} unmet"]
    return "\n".join(lines)
