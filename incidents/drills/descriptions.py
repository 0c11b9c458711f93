"""The shipped scenarios' descriptions (fleet/simulator/scenarios/*.yaml), marked for the
catalogue so the Drills page shows them in the reader's language. A description changed in
its YAML shows in English until it is changed here too (tests/incidents/test_zh_hans.py
says which)."""

from __future__ import annotations

from django.utils.translation import gettext, gettext_noop

DESCRIPTIONS = (
    gettext_noop(
        "Every fault that degrades an instance (503 on /v1, a gateway's 429, slow decoding, KV "
        "pressure, a queue backlog) or only its metrics (malformed, huge): finding and verdict."
    ),
    gettext_noop(
        "Every fault that takes an instance down, one per instance (crash, refused connections, "
        "500s, a dead engine, XID 79): its finding, failing then down, and its own incident."
    ),
    gettext_noop(
        "The faults that keep a probe waiting: a hang (unresponsive: failing, down, an incident), "
        "slow prefill and slow headers (time to first token over 5 s: degraded, never hung)."
    ),
    gettext_noop(
        "A crash, its restart, then 500s on the same instance: a second incident for the new "
        "fault; the first stays mitigated and is not reopened."
    ),
    gettext_noop(
        "A crash loop that comes and goes three times keeps one incident with its flaps in the "
        "timeline; an instance blinking every probe cycle never turns down and opens none."
    ),
    gettext_noop(
        "A whole host down: its three instances refuse connections at once. One host incident "
        "groups them; the instance on the other host stays up."
    ),
    gettext_noop(
        "The engine stalls while /health stays 200: no token is generated. The console says "
        "process.hung (failing, then down) and opens a Service down incident in that category."
    ),
    gettext_noop(
        "KV cache usage above 95 % with nothing waiting or preempted: normal for vLLM; the "
        "instance stays up and no incident opens."
    ),
    gettext_noop(
        "Two different faults on two instances of one host (a crash, 500s on every path): two "
        "incidents, one per instance and category, not a host incident."
    ),
    gettext_noop(
        "Case 3.4: long prompts from 02:55 exhaust the KV blocks (waiting queue, preemptions, "
        "rising TTFT, not a GPU OOM); at 02:58:32 the container's memory cgroup kills vLLM "
        "(exit 137, OOMKilled), a separate host-RAM failure."
    ),
    gettext_noop(
        # xgettext:no-python-format
        "Case 3.5: a cron batch surge from two client IPs at 14:00 pushes a vLLM instance just "
        "past capacity; the queue grows and 10-15% of requests time out until 14:30."
    ),
)


def described(description: str) -> str:
    """A scenario's description in the reader's language (as written when not marked here)."""
    return gettext(description) if description else ""
