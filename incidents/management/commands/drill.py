"""manage.py drill SCENARIO [--json] [--check] [--keep]: replay a scenario through the real
probes and the alert rules on accelerated time and print what the console said."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fleet.simulator.scenarios import ScenarioError, load_scenario
from incidents.drills.run import run_drill
from incidents.drills.text import report_text


class Command(BaseCommand):
    help = "Replay a scenario (a shipped name or a path) as a drill and print the verdicts and incidents."

    def add_arguments(self, parser) -> None:  # noqa: ANN001
        parser.add_argument(
            "scenario", help="a shipped scenario (drill-host-down or its file name) or a path"
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument(
            "--check", action="store_true", help="exit non-zero when an expectation is not met"
        )
        parser.add_argument(
            "--keep", action="store_true", help="keep the scratch inventory and its incidents"
        )

    def handle(self, *args, **options) -> None:
        name = options["scenario"]
        try:
            scenario = load_scenario(name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
        except ScenarioError as exc:
            raise CommandError(str(exc)) from None
        report = run_drill(scenario=scenario, keep=options["keep"])
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=2))
        else:
            self.stdout.write(report_text(report, scenario=scenario))
        if options["check"] and not report.passed:
            raise CommandError("unmet expectations:\n" + "\n".join(f"  {m}" for m in report.unmet))
