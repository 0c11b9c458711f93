"""The agents' command lines: `enroll_agent` on the console gives a host its token and the
way to start the agent; `agent` on the host refuses to start on bad input, saying why; the
systemd unit it prints is one systemd accepts."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from fleet.agent.install import AgentInstall
from fleet.agent.reports import token_for
from fleet.models import HostAgent
from tests.factories import make_host

VENV = Path(sys.executable).parent.parent


def enrol(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("enroll_agent", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_enrolling_prints_the_token_and_how_to_start_the_agent():
    make_host(name="node-a")
    said = enrol("node-a")
    agent = HostAgent.objects.get(host__name="node-a")
    assert f"token: {token_for(agent)}" in said
    assert "django-admin agent --host node-a" in said and "systemctl enable --now ops-agent.service" in said
    assert enrol("node-a", "--token-only").strip() == token_for(agent)  # enrolling again keeps it


@pytest.mark.django_db
def test_rotating_gives_a_new_token():
    make_host(name="node-a")
    first = enrol("node-a", "--token-only").strip()
    enrol("node-a", "--rotate")
    assert enrol("node-a", "--token-only").strip() != first


@pytest.mark.django_db
def test_enrolling_an_unknown_host_names_the_known_ones():
    make_host(name="node-a")
    with pytest.raises(CommandError, match=r"no GPU host named 'node-z'.*known: node-a"):
        enrol("node-z")


GOOD_TOKEN = "oa1." + "0" * 64


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--host", "node-a"], {}, "no token: set OPS_AGENT_TOKEN"),
        (["--host", "node-a"], {"OPS_AGENT_TOKEN": "hunter2"}, "does not look like an agent token"),
        (["--host", "Node A!"], {"OPS_AGENT_TOKEN": GOOD_TOKEN}, "--host 'Node A!'"),
        (["--host", "node-a", "--nvml", "rocm"], {"OPS_AGENT_TOKEN": GOOD_TOKEN}, "--nvml must be"),
        (["--host", "node-a", "--root", "/no/such/dir"], {"OPS_AGENT_TOKEN": GOOD_TOKEN}, "not a directory"),
        (["--host", "node-a", "--token-file", "/no/such/file"], {}, "--token-file /no/such/file"),
    ],
)
def test_the_agent_refuses_bad_input_before_it_starts(args, env, message, monkeypatch):
    monkeypatch.delenv("OPS_AGENT_TOKEN", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(CommandError, match=message):
        call_command("agent", *args)


def test_the_systemd_unit_is_one_systemd_accepts(tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed (Debian package systemd; `make tools`)"
    install = AgentInstall(
        host="node-a", token=GOOD_TOKEN, broker_url="redis://10.0.0.2:6379/0", prefix=str(VENV)
    )
    unit = tmp_path / "ops-agent.service"
    unit.write_text(install.unit)
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ops-agent.service" not in done.stderr  # no warnings about the unit either


def test_the_one_line_install_is_valid_shell_that_writes_the_unit_and_the_secret_file():
    install = AgentInstall(host="node-a", token=GOOD_TOKEN, broker_url="redis://10.0.0.2:6379/0")
    line = install.one_line
    sudo, sh, dash_c, script = shlex.split(line)
    assert (sudo, sh, dash_c) == ("sudo", "sh", "-c")
    checked = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert "[Service]" in script and "ExecStart=/opt/ops-agent/bin/django-admin agent --host node-a" in script
    assert "chmod 600 /etc/ops-agent/agent.env" in line and GOOD_TOKEN in line
