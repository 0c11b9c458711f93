"""`manage.py genconfig KIND [--preset NAME] [--set key=value ...] [--from-instance NAME]`:
the config generators' output in a terminal, from the same fields, checks and renderers as
the pages. The files go to stdout (or --output DIR), the cross-checks to stderr."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, no_translations

from diagnostics import configgen_fill
from diagnostics.configgen import registry
from diagnostics.configgen.base import SpecErrors
from fleet.models import Gateway, Instance


class Command(BaseCommand):
    help = "Generate a config: " + ", ".join(registry.GENERATORS) + "."

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=list(registry.GENERATORS))
        parser.add_argument("--preset", default="", help="a preset of the generator (the page lists them)")
        parser.add_argument(
            "--set", action="append", default=[], metavar="KEY=VALUE", help="a field's value; repeat for more"
        )
        parser.add_argument("--from-instance", help="fill the launch fields from an inventory instance")
        parser.add_argument("--from-gateway", help="fill the nginx fields from an inventory gateway")
        parser.add_argument("--output", help="write the files into this folder instead of printing them")
        parser.add_argument("--list-fields", action="store_true", help="print the fields and their defaults")

    @no_translations  # the terminal speaks English; the files are the same in every language anyway
    def handle(self, *args: Any, kind: str, **options: Any) -> None:
        generator = registry.get(kind)
        if options["list_fields"]:
            for field in generator.fields:
                self.stdout.write(f"{field.name:28} {field.default!r:24} {str(field.label).replace('`', '')}")
            return
        values = self._filled(generator, options)
        for item in options["set"]:
            key, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--set {item!r}: use KEY=VALUE")
            values[key.strip()] = value.replace("\\n", "\n")
        try:
            spec = generator.spec(values, preset=options["preset"])
        except SpecErrors as exc:
            raise CommandError(
                "; ".join(f"{name}: {message}" for name, message in exc.errors.items())
            ) from None
        files = generator.render(spec)
        for check in generator.checks(spec):
            self.stderr.write(f"[{check.severity}] {check.title}" + (f" -> {check.fix}" if check.fix else ""))
        if options["output"]:
            folder = Path(options["output"])
            folder.mkdir(parents=True, exist_ok=True)
            for file in files:
                (folder / file.name).write_text(file.content)
                self.stderr.write(f"wrote {folder / file.name}")
            return
        for file in files:
            if len(files) > 1:
                self.stdout.write(f"# ==> {file.name} <==")
            self.stdout.write(file.content, ending="" if file.content.endswith("\n") else "\n")

    def _filled(self, generator, options: dict[str, Any]) -> dict[str, str]:
        names = {f.name for f in generator.fields}
        if options["from_instance"]:
            instance = Instance.objects.filter(name=options["from_instance"]).first()
            if instance is None:
                raise CommandError(f"no instance named {options['from_instance']!r} in the inventory")
            return {k: v for k, v in configgen_fill.from_instance(instance).items() if k in names}
        if options["from_gateway"]:
            gateway = Gateway.objects.filter(name=options["from_gateway"]).first()
            if gateway is None:
                raise CommandError(f"no gateway named {options['from_gateway']!r} in the inventory")
            return {k: v for k, v in configgen_fill.from_gateway(gateway).items() if k in names}
        return {}
