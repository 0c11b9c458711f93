"""At probe time the target policy is checked again, on the address the probe connects to:
a URL saved before DNS changed (or written to the database by hand) still cannot reach the
metadata service or the console itself, and nothing is connected."""

from __future__ import annotations

import socket
import threading

import pytest
from django.core.management import call_command

from fleet.models import Instance
from fleet.nvml.base import NvmlError
from fleet.nvml.dcgm import DcgmExporterBackend
from fleet.probes.fetch import fetch_bounded, make_instance_client
from fleet.probes.outcomes import Outcome
from tests.factories import make_host, make_instance
from tests.probes.engines import FAST


class Listener:
    """A TCP port that counts the connections it accepts (and answers none of them)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    port = Listener()
    yield port
    port.close()


async def _fetch(url: str):
    async with make_instance_client(limits=FAST) as client:
        return await fetch_bounded(client=client, url=url, limits=FAST)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/"]
)
async def test_a_probe_never_connects_to_the_metadata_service(url):
    result = await _fetch(url)
    # Here nothing answers on 169.254.169.254: a connection attempt would end in a timeout.
    assert result.outcome == Outcome.ERROR
    assert "cloud metadata address" in result.error


@pytest.mark.anyio
async def test_a_name_resolving_to_the_console_is_refused_before_any_connection(listener, settings):
    settings.PORT = listener.port  # the listener plays the console
    result = await _fetch(f"http://localhost:{listener.port}/admin/")
    assert result.outcome == Outcome.ERROR and "this console itself" in result.error
    assert listener.accepted == 0


@pytest.mark.anyio
async def test_the_same_port_is_reached_when_it_is_not_the_console_s(listener, settings):
    settings.PORT = listener.port + 1
    result = await _fetch(f"http://localhost:{listener.port}/")
    assert result.outcome != Outcome.ERROR or "console" not in result.error
    assert listener.accepted >= 1


@pytest.mark.django_db(transaction=True)
def test_probe_now_on_an_instance_pointed_at_the_console_reports_the_refusal(listener, settings, capsys):
    settings.PORT = listener.port
    instance = make_instance(make_host())
    # Written past the form's check, as a stale row or a changed DNS answer would be.
    Instance.objects.filter(pk=instance.pk).update(base_url=f"http://127.0.0.1:{listener.port}")
    call_command("probe", instance.name)
    out = capsys.readouterr().out
    assert "this console itself" in out
    assert ": up" not in out.splitlines()[0]
    assert listener.accepted == 0


def test_the_dcgm_exporter_reader_is_guarded_too():
    with pytest.raises(NvmlError, match="link-local"):
        DcgmExporterBackend("http://169.254.9.9:9400/metrics", timeout=1.0).read()
