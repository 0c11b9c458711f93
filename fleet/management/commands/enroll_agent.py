"""`manage.py enroll_agent HOST [--rotate]`: give a GPU host an agent credential and print
how to start the agent there (the token, the systemd unit and a one-line install)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fleet.agent.install import AgentInstall
from fleet.agent.reports import token_for
from fleet.models import GpuHost, HostAgent
from fleet.models.agents import new_salt


class Command(BaseCommand):
    help = "Enrol a GPU host's agent and print its token, systemd unit and install line."

    def add_arguments(self, parser):
        parser.add_argument("host", help="the host's name in the inventory")
        parser.add_argument("--rotate", action="store_true", help="a new token; the old one stops working")
        parser.add_argument(
            "--broker", help="the broker URL the agent uses (default: this console's CELERY_BROKER_URL)"
        )
        parser.add_argument("--token-only", action="store_true", help="print the token alone")

    def handle(self, *args, host: str, **options):
        try:
            gpu_host = GpuHost.objects.get(name=host, drill=False)
        except GpuHost.DoesNotExist:
            known = (
                ", ".join(GpuHost.objects.filter(drill=False).values_list("name", flat=True)[:20]) or "none"
            )
            raise CommandError(f"no GPU host named {host!r} in the inventory (known: {known})") from None
        agent, created = HostAgent.objects.get_or_create(host=gpu_host)
        if options["rotate"] and not created:
            agent.token_salt = new_salt()
            agent.save(update_fields=["token_salt"])
        token = token_for(agent)
        if options["token_only"]:
            self.stdout.write(token)
            return
        install = AgentInstall(
            host=host, token=token, broker_url=options.get("broker") or settings.CELERY_BROKER_URL
        )
        said = "enrolled" if created else ("new token for" if options["rotate"] else "already enrolled:")
        self.stdout.write(f"{said} the agent of {host}\n")
        self.stdout.write(f"token: {token}\n")
        self.stdout.write(
            f"\nstart it by hand:\n  OPS_AGENT_TOKEN=... CELERY_BROKER_URL=... {install.command}\n"
        )
        self.stdout.write(f"\nor install it as a service (as root on {host}):\n  {install.one_line}\n")
