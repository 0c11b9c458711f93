"""`manage.py predeploy HOST --instance NAME [--model-dir PATH] [--wait S] [--json]`: the
guide's pre-deploy checklist on a GPU host's agent, as the host page runs it. It waits for
the agent's answer (the central worker stores it) and exits 1 unless the host is ready."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.i18n import shown
from diagnostics import predeploy_service
from diagnostics.models import PredeployRun
from fleet.models import GpuHost

MARKS = {"pass": "ok  ", "fail": "FAIL", "warn": "warn", "unknown": "?   "}


class Command(BaseCommand):
    help = "Run the pre-deploy checklist (guide 4.1.1) on a GPU host's agent and print its items."

    def add_arguments(self, parser):
        parser.add_argument("host", help="the GPU host's name in the inventory")
        parser.add_argument("--instance", required=True, help="the instance to deploy there (its needs)")
        parser.add_argument(
            "--model-dir", help="the model's directory on the host (default: as the page fills it)"
        )
        parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the agent")
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, host: str, **options: Any) -> None:
        gpu_host = GpuHost.objects.filter(name=host, drill=False).first()
        if gpu_host is None:
            raise CommandError(f"no GPU host named {host!r} in the inventory")
        instance = gpu_host.instances.filter(name=options["instance"]).first()
        if instance is None:
            known = ", ".join(gpu_host.instances.values_list("name", flat=True)) or "none"
            raise CommandError(f"host {host} has no instance {options['instance']!r} (known: {known})")
        model_dir = options.get("model_dir") or predeploy_service.default_model_dir(instance)
        if not model_dir.startswith("/"):
            raise CommandError("--model-dir must be an absolute path on the host")
        try:
            run = predeploy_service.start(
                host=gpu_host, instance=instance, model_dir=model_dir, requested_by="cli"
            )
        except predeploy_service.NoAgent as exc:
            raise CommandError(shown(exc.args[0])) from None
        run = self.wait(run, options["wait"])
        if options["json"]:
            self.stdout.write(json.dumps(self.as_json(run), indent=2, ensure_ascii=False))
        else:
            self.print_items(run)
        if run.overall not in ("ready", "ready with warnings"):
            raise CommandError(f"{host}: {run.overall or 'no answer'}")

    def wait(self, run: PredeployRun, seconds: float) -> PredeployRun:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.judged_at:
                return run
            time.sleep(0.5)
        raise CommandError(
            f"the agent of {run.host.name} did not answer in {seconds:g} s: is it running, and is the "
            "console's worker (which stores its answers) running?"
        )

    def as_json(self, run: PredeployRun) -> dict[str, Any]:
        items = [
            item | {"title": shown(item["title"]), "evidence": shown(item["evidence"])} for item in run.items
        ]
        return {"host": run.host.name, "overall": run.overall, "error": run.error, "items": items}

    def print_items(self, run: PredeployRun) -> None:
        if run.error:
            self.stdout.write(f"the agent could not gather the facts: {run.error}")
        for item in run.items:
            self.stdout.write(
                f"[{MARKS.get(item['status'], '?   ')}] {shown(item['title'])}: {shown(item['evidence'])}"
            )
        self.stdout.write(f"{run.host.name}: {run.overall}")
