"""`manage.py probe INSTANCE [--json]`: probe one inventory instance now and print the result."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fleet import probe_service
from fleet.models import Instance, ProbeKindChoice, Trigger
from fleet.probes.parts import ProbeKind


class Command(BaseCommand):
    help = "Probe one instance now (health and phases, stream, metrics, GPU) and print the verdict."

    def add_arguments(self, parser):
        parser.add_argument("instance", help="the instance's name in the inventory")
        parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
        parser.add_argument(
            "--kind",
            choices=[k.value for k in ProbeKind],
            help="probe this kind alone (judged with the stored results of the others); default: every kind",
        )

    def handle(self, *args, instance: str, kind: str | None = None, **options):
        try:
            target = Instance.objects.get(name=instance)
        except Instance.DoesNotExist:
            known = ", ".join(Instance.objects.values_list("name", flat=True)[:20]) or "none"
            raise CommandError(f"no instance named {instance!r} in the inventory (known: {known})") from None
        run = probe_service.request_probe(
            instance=target, requested_by="cli", trigger=Trigger.CLI, kind=kind or ProbeKindChoice.FULL
        )
        run = probe_service.run_requested_probe(run_id=run.pk)
        if options["json"]:
            self.stdout.write(
                _json_dump(
                    {
                        "instance": target.name,
                        "verdict": run.verdict,
                        "findings": run.findings,
                        "result": run.result,
                    }
                )
            )
            return
        self.stdout.write(_summary(target, run))


def _json_dump(data) -> str:
    return json.dumps(data, indent=2, sort_keys=True, default=str)


def _summary(instance: Instance, run) -> str:
    measured = "" if run.kind == ProbeKindChoice.FULL else f" (measured: {run.kind}; other kinds as stored)"
    lines = [f"{instance.name} ({instance.base_url}): {run.verdict}{measured}"]
    phases = run.result.get("phases") or {}
    if phases:
        lines.append(
            "  "
            + "  ".join(
                f"{k.removesuffix('_s')} {v:.3f}s"
                for k, v in phases.items()
                if k.endswith("_s") and isinstance(v, int | float)
            )
        )
    lines.extend(f"  - [{f['severity']}] {f['category']}: {f['evidence']}" for f in run.findings)
    if not run.findings:
        lines.append("  nothing wrong found")
    return "\n".join(lines)
