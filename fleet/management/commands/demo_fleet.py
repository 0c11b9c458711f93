"""manage.py demo_fleet: load the demo fleet (3 hosts, 5 instances, 1 gateway); safe to rerun."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fleet.inventory_io import apply_import, counts_summary, plan_import

DEMO_FLEET = Path(__file__).resolve().parents[2] / "demo_fleet.yaml"


class Command(BaseCommand):
    help = "Load the demo fleet from fleet/demo_fleet.yaml (logged with source 'demo')."

    def handle(self, *args, **options) -> None:
        text = DEMO_FLEET.read_text(encoding="utf-8").replace(
            "{sim_control}", settings.SIMULATOR_CONTROL_URL.rstrip("/")
        )
        plan = plan_import(text=text, fmt="yaml")
        if not plan.ok:
            problems = "; ".join(str(error) for error in plan.errors)
            raise CommandError(f"The demo fleet does not import: {problems}")
        result = apply_import(plan=plan, actor=None, source="demo")
        self.stdout.write(f"Demo fleet: {counts_summary(result.counts)}.")
