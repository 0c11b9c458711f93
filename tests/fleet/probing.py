"""Shared set-up for the probe tests: inventory instances served by the real simulator."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

from django.db import connection

from fleet import probe_service
from tests.factories import make_gpu, make_host, make_instance


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def simulated_instances(n: int = 2, **fields):
    host = make_host(name="sim-host", gpu_telemetry="simulated", numa_nodes=1)
    instances = []
    for i, port in enumerate(free_ports(n)):
        gpu = make_gpu(host, index=i, numa_node=0)
        instances.append(
            make_instance(
                host, name=f"sim-vllm-{i}", base_url=f"http://127.0.0.1:{port}", gpus=[gpu], **fields
            )
        )
    return instances


def health_cycle_on_a_thread() -> None:
    """One scheduled health sweep, on a thread of its own: Playwright's sync API keeps an
    event loop running in the test's thread, and the probes run their own."""

    def sweep():
        try:
            probe_service.run_cycle(kind="health")
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(sweep).result()
