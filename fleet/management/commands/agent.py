"""`manage.py agent --host NAME`: run this host's agent, a Celery worker on the host's
queues (host.NAME and host.NAME.long) that runs only the fixed, read-only checks
(fleet.agent.worker) and heartbeats to the console. It needs the broker URL and the
host's token (`manage.py enroll_agent NAME` prints both), never the console's database."""

from __future__ import annotations

import os
import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from fleet.agent.credentials import TOKEN_PREFIX
from fleet.agent.routing import host_queues
from fleet.agent.worker import Agent, AgentConfig, parse_nvml_choice
from fleet.validators import validate_name

TOKEN_RE = re.compile(rf"^{re.escape(TOKEN_PREFIX)}[0-9a-f]{{64}}$")


class Command(BaseCommand):
    help = "Run the agent of one GPU host: a Celery worker on that host's queues, with a heartbeat."

    def add_arguments(self, parser):
        parser.add_argument("--host", required=True, help="the host's name in the console's inventory")
        parser.add_argument(
            "--token-file",
            help="a file holding the host's token (default: the OPS_AGENT_TOKEN variable)",
        )
        parser.add_argument(
            "--broker", help="the broker URL (default: CELERY_BROKER_URL, as the console's settings read it)"
        )
        parser.add_argument("--root", default="/", help="read the host's files under this root (default /)")
        parser.add_argument(
            "--nvml",
            default="pynvml",
            help="pynvml (default), off, or simulated=<URL of a simulator's /_sim/nvml>",
        )
        parser.add_argument("--docker-socket", default="/var/run/docker.sock")
        parser.add_argument("--heartbeat", type=float, default=30.0, help="seconds between heartbeats")
        parser.add_argument("--concurrency", type=int, default=2)
        parser.add_argument("--loglevel", default="INFO")

    def handle(self, *args, **options):
        config = self.config_from(options)
        agent = Agent(config)
        self.stdout.write(f"agent for {config.host}: queues {', '.join(host_queues(config.host))}")
        agent.start_heartbeat()
        try:
            agent.app.worker_main(
                argv=[
                    "worker",
                    "--queues",
                    ",".join(host_queues(config.host)),
                    "--pool",
                    "threads",
                    "--concurrency",
                    str(options["concurrency"]),
                    "--hostname",
                    f"agent@{config.host}",
                    "--loglevel",
                    options["loglevel"],
                    "--without-gossip",
                    "--without-mingle",
                ]
            )
        finally:
            agent.stop()

    def config_from(self, options) -> AgentConfig:
        host = options["host"]
        try:
            validate_name(host)
        except ValidationError as exc:
            raise CommandError(f"--host {host!r}: {' '.join(exc.messages)}") from None
        token = self.token(options.get("token_file"))
        try:
            nvml = parse_nvml_choice(options["nvml"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        root = Path(options["root"])
        if not root.is_dir():
            raise CommandError(f"--root {root} is not a directory")
        if options["heartbeat"] <= 0 or options["concurrency"] < 1:
            raise CommandError("--heartbeat must be positive and --concurrency at least 1")
        broker = options.get("broker") or settings.CELERY_BROKER_URL
        filesystem = broker.startswith("filesystem://")
        return AgentConfig(
            host=host,
            token=token,
            broker_url=broker,
            root=root,
            nvml=nvml,
            docker_socket=options["docker_socket"],
            heartbeat_s=options["heartbeat"],
            transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS if filesystem else {},
        )

    def token(self, token_file: str | None) -> str:
        if token_file:
            try:
                token = Path(token_file).read_text().strip()
            except OSError as exc:
                raise CommandError(f"--token-file {token_file}: {exc.strerror}") from None
        else:
            token = os.environ.get("OPS_AGENT_TOKEN", "").strip()
        if not token:
            raise CommandError(
                "no token: set OPS_AGENT_TOKEN or pass --token-file (the console's host page, or "
                "`manage.py enroll_agent HOST` on the console, gives it)"
            )
        if not TOKEN_RE.match(token):
            raise CommandError(
                f"the token does not look like an agent token ({TOKEN_PREFIX} and 64 hex digits)"
            )
        return token
