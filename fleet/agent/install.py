"""What an operator runs on a GPU host to start its agent: the systemd unit, the
environment file and a one-line install, made for one host (shown on the host page and
printed by `manage.py enroll_agent`).

The agent runs as its own unprivileged user; it reads the kernel log (CAP_SYSLOG, as
`dmesg` needs where kernel.dmesg_restrict=1), the Docker socket (the docker group: the
Engine API is read with GET only) and the journal (systemd-journal group); the rest of
the system is read-only to it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

PREFIX = "/opt/ops-agent"
ENV_FILE = "/etc/ops-agent/agent.env"
UNIT_NAME = "ops-agent.service"
PACKAGE = "llm-ops-console"


@dataclass(frozen=True, kw_only=True)
class AgentInstall:
    host: str
    token: str
    broker_url: str
    package: str = PACKAGE
    prefix: str = PREFIX  # where the agent's virtual environment lives on the host

    @property
    def env_file(self) -> str:
        return (
            f"# The agent of GPU host {self.host}; readable by root only.\n"
            f"CELERY_BROKER_URL={self.broker_url}\n"
            f"OPS_AGENT_TOKEN={self.token}\n"
            "DJANGO_SETTINGS_MODULE=ops_console.settings\n"
        )

    @property
    def command(self) -> str:
        return f"{self.prefix}/bin/django-admin agent --host {self.host}"

    @property
    def unit(self) -> str:
        return f"""[Unit]
Description=LLM Ops Console agent for GPU host {self.host}
After=network-online.target docker.service
Wants=network-online.target

[Service]
Type=simple
User=ops-agent
Group=ops-agent
SupplementaryGroups=docker systemd-journal
EnvironmentFile={ENV_FILE}
ExecStart={self.command}
Restart=always
RestartSec=5
AmbientCapabilities=CAP_SYSLOG
CapabilityBoundingSet=CAP_SYSLOG
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes

[Install]
WantedBy=multi-user.target
"""

    @property
    def one_line(self) -> str:
        """Create the user, install the package in its own venv, write the environment file
        and the unit, start it. Root on the GPU host; the package from your index."""
        env = shlex.quote(self.env_file)
        unit = shlex.quote(self.unit)
        steps = [
            "id ops-agent >/dev/null 2>&1 || "
            "useradd --system --no-create-home --shell /usr/sbin/nologin ops-agent",
            f"python3 -m venv {self.prefix}",
            f"{self.prefix}/bin/pip install --quiet {shlex.quote(self.package)}",
            f"install -d -m 700 {ENV_FILE.rsplit('/', 1)[0]}",
            f"printf %s {env} > {ENV_FILE}",
            f"chmod 600 {ENV_FILE}",
            f"printf %s {unit} > /etc/systemd/system/{UNIT_NAME}",
            "systemctl daemon-reload",
            f"systemctl enable --now {UNIT_NAME}",
        ]
        return "sudo sh -c " + shlex.quote(" && ".join(steps))
