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

from collections.abc import Callable, Sequence

from core.i18n import Message, later
from fleet.probes.engines import dialect_for
from fleet.probes.findings import Category, Finding, Severity
from fleet.probes.gpu import GpuProbeResult
from fleet.probes.target import ProbeTarget

# Each outcome's code, category and evidence, from the base URL, the path and the error.
_CONNECTION: dict[str, tuple[str, Category, Callable[[str, str | Message, str], Message]]] = {
    "dns_failure": (
        "dns.failure",
        Category.NETWORK,
        lambda base, where, error: later(
            "The DNS lookup for %(base)s failed: %(error)s", base=base, error=error
        ),
    ),
    "connect_timeout": (
        "connect.timeout",
        Category.CONNECT,
        lambda base, where, error: later(
            "No TCP connection to %(base)s in time (%(error)s): a firewall, routing or a dead host",
            base=base,
            error=error,
        ),
    ),
    "tls_error": (
        "tls.error",
        Category.TLS,
        lambda base, where, error: later(
            "The TLS handshake with %(base)s failed: %(error)s", base=base, error=error
        ),
    ),
    "reset": (
        "connection.reset",
        Category.NETWORK,
        lambda base, where, error: later(
            "The connection was reset or closed on %(where)s before a full answer: %(error)s",
            where=where,
            error=error,
        ),
    ),
}


def _refused(
    target: ProbeTarget, gpus: GpuProbeResult | None, indices: Sequence[int] | None
) -> tuple[str, Category, Message]:
    base = target.base_url
    dialect = dialect_for(target.engine)
    reading = gpus.reading if gpus else None
    if reading is None or not indices:
        return (
            "connect.refused",
            Category.NOT_LISTENING,
            later(
                "Connection refused on %(base)s: nothing listens on the port; %(why)s",
                base=base,
                why=later(dialect.refused),
            ),
        )
    mine = [g for g in reading.gpus if g.index in indices]
    busy = [g for g in mine if g.processes]
    if busy:
        held = ", ".join(f"GPU {g.index} ({sum(p.used_memory_mib for p in g.processes)} MiB)" for g in busy)
        return (
            "connect.refused",
            Category.NOT_LISTENING,
            later(
                "Connection refused on %(base)s: nothing listens on the port; a process holds %(held)s, "
                "%(why)s",
                base=base,
                held=held,
                why=later(dialect.refused_while_gpu_held),
            ),
        )
    listed = ", ".join(str(i) for i in sorted(indices))
    return (
        "process.gone",
        Category.GONE,
        later(
            "Connection refused on %(base)s: nothing listens on the port, and no process runs on its "
            "GPU %(listed)s: the engine is gone",
            base=base,
            listed=listed,
        ),
    )


def connection_finding(
    outcome: str,
    *,
    where: str | Message,
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
        code, category, words = _CONNECTION[outcome]
        evidence = words(target.base_url, where, error)
    else:
        return None
    return Finding(code=code, category=category, severity=severity, evidence=evidence, source=source)


def _via(server: str, retry_after: str) -> str:
    """The headers that tell who answered (identifiers, shown as they came)."""
    parts = [f"Server: {server}"] if server else []
    parts += [f"Retry-After: {retry_after}"] if retry_after else []
    return ", ".join(parts)


def _seen(*, status: int | None, path: str | Message, error: str, via: str, why: Message) -> Message:
    answer = error or f"HTTP {status}"
    if via:
        return later(
            "%(answer)s from %(path)s (%(via)s): %(why)s", answer=answer, path=path, via=via, why=why
        )
    return later("%(answer)s from %(path)s: %(why)s", answer=answer, path=path, why=why)


def _status_words(status: int | None, engine: str) -> tuple[str, Category, Message]:
    """The code, category and meaning of an error status, in the engine dialect's words."""
    dialect = dialect_for(engine)
    if status == 429:
        return "http.429", Category.HTTP_429, later(dialect.who_sent_429)
    if status == 503:
        return "http.503", Category.QUEUE, later(dialect.why_503)
    if status in (401, 403):
        return (
            "auth.rejected",
            Category.CLIENT,
            later("the API key (from the inventory's variable) is missing or wrong"),
        )
    if status == 404:
        return "model.not_found", Category.MODEL_MISMATCH, later("the model name or the route is wrong")
    if status is not None and (status >= 500 or status in dialect.failed_generation_statuses):
        return "request.failed", Category.SERVER_ERROR, later("the engine failed the request")
    if status is not None and status < 500:
        return "request.rejected", Category.PROBE_ERROR, later("the probe's tiny request was rejected")
    return "request.failed", Category.PROBE_ERROR, later("an unexpected answer")


def status_finding(
    *,
    status: int | None,
    path: str | Message,
    error: str,
    server: str,
    retry_after: str,
    engine: str,
    source: str,
) -> Finding:
    """The finding for an HTTP error status on a generation request; who sends a 429 and
    why a 503 comes are the engine dialect's words."""
    code, category, why = _status_words(status, engine)
    evidence = _seen(status=status, path=path, error=error, via=_via(server, retry_after), why=why)
    return Finding(code=code, category=category, severity="degraded", evidence=evidence, source=source)
