"""The vocabulary of findings: categories, severities, thresholds.

Categories follow the guide's taxonomy (2.1) where it has one; `oom.kv_pressure` is the
corrected reading of "KV cache full" (corrections #3: vLLM waits and preempts, no OOM).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from core.i18n import Message

Severity = Literal["info", "degraded", "down"]
SEVERITY_RANK = {"down": 0, "degraded": 1, "info": 2}


class Category(StrEnum):
    """The taxonomy category (core.taxonomy) each kind of finding belongs to: a finding's
    category is a taxonomy key, so an incident opened on a finding names the cause."""

    TTFT = "timeout.ttft"
    TPS = "timeout.tps"
    CONNECT = "timeout.connect"
    NETWORK = "timeout.network"
    TLS = "network.tls"
    HTTP_429 = "rate_limit.http_429"
    QUEUE = "rate_limit.queue"
    KV_PRESSURE = "oom.kv_pressure"  # not an OOM in vLLM: waiting and preemption (corrections #3)
    THERMAL = "gpu.thermal"
    POWER = "gpu.thermal"  # the taxonomy keeps thermal and power throttling together
    SATURATED = "gpu.saturated"
    XID = "cuda.xid"
    ECC = "cuda.xid"  # the taxonomy's "GPU hardware fault (XID, ECC)"
    NUMA = "gpu.numa"
    NOT_LISTENING = "process.not_started"
    GONE = "process.not_started"
    UNRESPONSIVE = "process.unresponsive"
    ENGINE_DEAD = "process.engine_dead"
    HUNG = "process.hung"
    SERVER_ERROR = "server.5xx"
    REQUEST_ERRORS = "server.5xx"
    MODEL_MISMATCH = "config.model_name"
    VERSION_MISMATCH = "config.version"
    CLIENT = "client.error"
    # Proposed taxonomy keys (docs/vllm-metrics-judgements.md): an engine put to sleep, a
    # prefix cache the router no longer feeds, speculative decoding that slows generation,
    # LoRA adapters waiting for a slot.
    ASLEEP = "process.asleep"
    PREFIX_CACHE = "routing.prefix_cache"
    SPEC_DECODE = "config.spec_decode"
    LORA_SLOTS = "rate_limit.lora_slots"
    METRICS = "probe.metrics"
    PROBE_ERROR = "probe.error"
    GARBAGE = "probe.garbage"


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """The guide's judgement rules (2.2.1–2.2.3), all editable. A value above the
    threshold triggers the finding."""

    connect_s: float = 1.0  # Connect > 1 s → network
    ttfb_s: float = 5.0  # TTFB (or the stream's TTFT) > 5 s → TTFT
    decode_gap_s: float = 10.0  # Total − TTFB (or − TTFT) large → TPS
    waiting: float = 10  # waiting > 10 → backlog
    running_fraction: float = 0.95  # running ≥ 95 % of max_num_seqs → batch full
    # KV pressure: usage above this AND requests waiting or preempted (corrections #11). A
    # long prompt waits for its blocks with the cache 90-95 % full, so 0.9, not 0.95.
    kv_cache_usage: float = 0.9
    # KV pressure: more than this many waiting (or any preemption). A request or two waits
    # for a moment between engine steps on any busy server; a full cache makes the queue grow.
    kv_min_waiting: float = 5
    preemptions_per_s: float = 0.0
    temperature_c: float = 85  # a hint; throttle reasons are the evidence (corrections #10)
    sm_utilization_pct: float = 95  # SM > 95 % → saturated
    ttft_p95_s: float = 5.0
    error_ratio: float = 0.05  # the guide's 5 % error-rate alert
    tps_drop_ratio: float = 0.4  # stream tokens/s this share below the instance's usual → TPS
    down_after_failures: int = 3
    # The judgements of vLLM's newer metrics (docs/vllm-metrics-judgements.md gives the
    # reasons in full).
    # Prefix-cache collapse: this window's hit rate below this share of the instance's usual
    # rate ("far below": a quarter, not a dip), while at least prefix_min_queried_tokens
    # prompt tokens were looked up in the window (a window of one short prompt says
    # nothing), and only where the usual rate is at least prefix_min_usual_hit_rate (a
    # cache that hit 5 % has little to lose).
    prefix_hit_collapse_ratio: float = 0.25
    prefix_min_queried_tokens: float = 2000
    prefix_min_usual_hit_rate: float = 0.2
    # Speculative decoding: the cost of one drafted token (drafting it and verifying it)
    # as a share of one decode step of the target model. A step with k drafted tokens costs
    # about 1 + k × this and yields 1 + a tokens (a accepted per draft), so the drafts cost
    # more than they save once a < k × this, i.e. once the acceptance rate a / k is below
    # it. 0.1 is generous to the draft: an EAGLE head or n-gram costs less, a draft model a
    # tenth of the target's size about this much; the verification's own cost grows with the
    # batch.
    spec_decode_token_cost: float = 0.1
    spec_decode_min_drafts: float = 100  # drafts in the window before acceptance is judged


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One finding. Its evidence is given as a message (core.i18n.later), read later in the
    reader's language; it is kept as its English text in `evidence` (for the API, logs and
    comparisons) and as the message in `message`. A plain string is kept as it is."""

    code: str
    category: str
    severity: Severity
    evidence: str | Message
    source: str = ""  # readiness, phases, stream, metrics, gpu
    message: Message | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.evidence, Message):
            object.__setattr__(self, "message", self.evidence)
            object.__setattr__(self, "evidence", str(self.evidence))

    def to_dict(self) -> dict[str, Any]:
        """As stored: the English evidence, and its message (evidence_message) when it has one."""
        stored: dict[str, Any] = {
            "code": self.code,
            "category": self.category,
            "severity": self.severity,
            "evidence": str(self.evidence),
            "source": self.source,
        }
        if self.message is not None:
            stored["evidence_message"] = self.message.to_json()
        return stored
