"""Findings for requests that failed: the connection (guide 2.2.4) or the HTTP status.

What a refused port, a 429 or a 503 means depends on the engine, so the words come from
its dialect (fleet/probes/engines/) and an instance's findings never explain it by another
engine. A refused connection is what a starting vLLM or TGI looks like (each binds its
port only after loading the model, corrections #7), while Ollama listens at once, so for
it a refused port means the server is not running. When the instance's GPUs are known,
NVML tells more: no process on them means the process is gone; a process holding memory
means a vLLM or TGI still loading. 429 never comes from vLLM or Ollama themselves
(corrections #8): a gateway sent it, or TGI is overloaded.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet.probes.engines import dialect_for
from fleet.probes.findings import Category, Finding, Severity
from fleet.probes.gpu import GpuProbeResult
from fleet.probes.target import ProbeTarget

_CONNECTION = {
    "dns_failure": ("dns.failure", Category.NETWORK, "The DNS lookup for {base} failed: {error}"),
    "connect_timeout": (
        "connect.timeout",
        Category.CONNECT,
        "No TCP connection to {base} in time ({error}): a firewall, routing or a dead host",
    ),
    "tls_error": ("tls.error", Category.TLS, "The TLS handshake with {base} failed: {error}"),
    "reset": (
        "connection.reset",
        Category.NETWORK,
        "The connection was reset or closed on {where} before a full answer: {error}",
    ),
}


def _refused(
    target: ProbeTarget, gpus: GpuProbeResult | None, indices: Sequence[int] | None
) -> tuple[str, Category, str]:
    base = f"Connection refused on {target.base_url}: nothing listens on the port"
    dialect = dialect_for(target.engine)
    reading = gpus.reading if gpus else None
    if reading is None or not indices:
        return "connect.refused", Category.NOT_LISTENING, f"{base}; {dialect.refused}"
    mine = [g for g in reading.gpus if g.index in indices]
    busy = [g for g in mine if g.processes]
    if busy:
        held = ", ".join(f"GPU {g.index} ({sum(p.used_memory_mib for p in g.processes)} MiB)" for g in busy)
        return (
            "connect.refused",
            Category.NOT_LISTENING,
            f"{base}; a process holds {held}, {dialect.refused_while_gpu_held}",
        )
    listed = ", ".join(str(i) for i in sorted(indices))
    return (
        "process.gone",
        Category.GONE,
        f"{base}, and no process runs on its GPU {listed}: the engine is gone",
    )


def connection_finding(
    outcome: str,
    *,
    where: str,
    error: str,
    target: ProbeTarget,
    source: str,
    gpus: GpuProbeResult | None = None,
    indices: Sequence[int] | None = None,
) -> Finding | None:
    """The finding for a connection-level failure, None for other outcomes. Failing the
    readiness routes means the instance is unreachable (down); a failure on a later
    request of a reachable instance is degraded."""
    severity: Severity = "down" if source == "readiness" else "degraded"
    if outcome == "refused":
        code, category, evidence = _refused(target, gpus, indices)
    elif outcome in _CONNECTION:
        code, category, template = _CONNECTION[outcome]
        evidence = template.format(base=target.base_url, where=where, error=error)
    else:
        return None
    return Finding(code=code, category=category, severity=severity, evidence=evidence, source=source)


def _via(server: str, retry_after: str) -> str:
    parts = [f"Server: {server}"] if server else []
    parts += [f"Retry-After: {retry_after}"] if retry_after else []
    return f" ({', '.join(parts)})" if parts else ""


def status_finding(
    *, status: int | None, path: str, error: str, server: str, retry_after: str, engine: str, source: str
) -> Finding:
    """The finding for an HTTP error status on a generation request; who sends a 429 and
    why a 503 comes are the engine dialect's words."""
    dialect = dialect_for(engine)
    seen = f"{error or f'HTTP {status}'} from {path}{_via(server, retry_after)}"

    def make(code: str, category: str, evidence: str) -> Finding:
        return Finding(code=code, category=category, severity="degraded", evidence=evidence, source=source)

    if status == 429:
        return make("http.429", Category.HTTP_429, f"{seen}: {dialect.who_sent_429}")
    if status == 503:
        return make("http.503", Category.QUEUE, f"{seen}: {dialect.why_503}")
    if status in (401, 403):
        return make(
            "auth.rejected",
            Category.CLIENT,
            f"{seen}: the API key (from the inventory's variable) is missing or wrong",
        )
    if status == 404:
        return make(
            "model.not_found", Category.MODEL_MISMATCH, f"{seen}: the model name or the route is wrong"
        )
    if status is not None and (status >= 500 or status in dialect.failed_generation_statuses):
        return make("request.failed", Category.SERVER_ERROR, f"{seen}: the engine failed the request")
    if status is not None and status < 500:
        return make(
            "request.rejected", Category.PROBE_ERROR, f"{seen}: the probe's tiny request was rejected"
        )
    return make("request.failed", Category.PROBE_ERROR, f"{seen}: an unexpected answer")
