"""Every config generator, by the key the page, the URL and `manage.py genconfig` use."""

from __future__ import annotations

from diagnostics.configgen import (
    alert_rules,
    clients,
    docker,
    grafana,
    kubernetes,
    nginx,
    sglang_launch,
    systemd,
    vllm_serve,
)
from diagnostics.configgen.base import Generator

GENERATORS: dict[str, Generator] = {
    g.key: g
    for g in (
        vllm_serve.GENERATOR,
        sglang_launch.GENERATOR,
        docker.GENERATOR,
        kubernetes.GENERATOR,
        systemd.GENERATOR,
        nginx.GENERATOR,
        clients.GENERATOR,
        alert_rules.GENERATOR,
        grafana.GENERATOR,
    )
}
# The launch generators share one set of fields: a deployment bundle renders them all.
DEPLOYMENT = ("vllm", "docker", "k8s", "systemd")


def get(key: str) -> Generator:
    try:
        return GENERATORS[key]
    except KeyError:
        raise KeyError(f"no generator {key!r}; generators: {', '.join(GENERATORS)}") from None
