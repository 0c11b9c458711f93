"""Where a time to first token goes: the client's TTFT split into its parts.

The parts, in the order a request meets them (docs/ttft-breakdown.md says how each is
measured and what it cannot tell):

  connect   DNS and the TCP connect (curl's time_connect) of the health probe's request
  tls       the TLS handshake (time_appconnect − time_connect); none on plain HTTP
  gateway   the gateway gap: the TTFB through the gateway minus the TTFB straight to the
            engine, for the same one-token request
  queue     the engine's mean queue time over its last metrics window
            (vllm:request_queue_time_seconds: queued → scheduled)
  prefill   the engine's mean prefill time over that window
            (vllm:request_prefill_time_seconds: scheduled → first token), with the prompt
            tokens it computed vs read from the prefix cache
  other     what is left of the TTFT: tokenizing, the API server, the first decode step,
            and the difference between one probe and the engine's average

`split(inputs)` takes plain numbers (`TtftInputs`; `inputs_from_results` reads them from
the probes' stored JSON) and returns a `Breakdown`: each part in seconds and as a share,
"not measured" parts with the reason, and one sentence naming the largest part as the
cause ("TTFT 6.1 s: 4.8 s queued (waiting for capacity), 1.1 s prefill"). Texts are
messages (core.i18n), shown later in the reader's language. Nothing here touches Django.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from core.i18n import Message, later

MEASURED: Literal["measured"] = "measured"
NOT_MEASURED: Literal["not_measured"] = "not_measured"
NOT_APPLICABLE: Literal["not_applicable"] = "not_applicable"
Status = Literal["measured", "not_measured", "not_applicable"]

PART_KEYS = ("connect", "tls", "gateway", "queue", "prefill", "other")

# A part beside the largest one is named in the sentence from this share of the TTFT on.
NAMED_SHARE = 0.1
MAX_NAMED = 3
# The parts may add up to more than one probe's TTFT (engine averages vs one request); past
# this much more, the breakdown says so.
OVERSHOOT = 1.05

# Fill colours of the bar, one per part (the page's table repeats them as swatches).
COLOURS = {
    "connect": "#4c78a8",
    "tls": "#72b7b2",
    "gateway": "#b279a2",
    "queue": "#e45756",
    "prefill": "#f58518",
    "other": "#9d9d9d",
}

# The metrics probe's derived keys of vLLM's prompt tokens by source (fleet.probes.scrape:
# the prompt_tokens_by_source:<source> counters as per-second rates).
PROMPT_SOURCE_KEYS = {
    source: f"prompt_tokens_{source}_per_s"
    for source in ("local_compute", "local_cache_hit", "external_kv_transfer")
}

LABELS = {
    "connect": later("connect (DNS and TCP)"),
    "tls": later("TLS handshake"),
    "gateway": later("gateway gap"),
    "queue": later("queue"),
    "prefill": later("prefill"),
    "other": later("other (not explained by the parts above)"),
}


@dataclass(frozen=True, kw_only=True)
class TtftInputs:
    """What the split reads, all optional: a missing one makes its part "not measured".

    Times from the health probe's phases are cumulative from the start of the request, as
    curl prints them: connect_s includes DNS, tls_s includes connect_s."""

    ttft_s: float | None = None  # the stream probe's time to the first token (one request)
    connect_s: float | None = None
    tls_s: float | None = None
    reused_connection: bool = False
    https: bool | None = None  # the scheme the probes use; None: not known
    gateway: str = ""  # the gateway in front of the instance, when there is one
    gateway_ttfb_s: float | None = None  # the one-token request through the gateway
    direct_ttfb_s: float | None = None  # the same request straight to the engine
    gateway_error: str = ""  # why the request through the gateway got no answer
    ttft_through_gateway: bool = False  # whether the stream probe went through the gateway
    queue_s: float | None = None  # the engine's mean queue time over its window
    prefill_s: float | None = None  # the engine's mean prefill time over its window
    window_s: float | None = None  # the engine's window, seconds between two scrapes
    prompt_tokens_mean: float | None = None  # prompt tokens per request over the window
    computed_tokens_per_s: float | None = None  # prompt tokens by source: local_compute
    cached_tokens_per_s: float | None = None  # local_cache_hit
    transferred_tokens_per_s: float | None = None  # external_kv_transfer
    prefix_cache_queries_per_s: float | None = None  # tokens looked up in the prefix cache
    prefix_cache_hits_per_s: float | None = None  # tokens found there

    @property
    def anything(self) -> bool:
        """Whether any time was measured at all."""
        times = (self.ttft_s, self.connect_s, self.queue_s, self.prefill_s, self.gateway_ttfb_s)
        return any(_number(t) is not None for t in times)


@dataclass(frozen=True, kw_only=True)
class CacheSplit:
    """The engine's prompt tokens over its window: computed, read from its prefix cache,
    transferred from another engine's KV cache (shares of all prompt tokens), and per
    request where the prompt length is known."""

    computed_share: float
    cached_share: float
    transferred_share: float = 0.0
    source: Literal["prompt_tokens_by_source", "prefix_cache"] = "prefix_cache"
    prompt_tokens: int | None = None  # per request
    computed_tokens: int | None = None
    cached_tokens: int | None = None
    transferred_tokens: int | None = None

    @property
    def note(self) -> Message:
        if self.prompt_tokens is not None:
            values = {
                "prompt": self.prompt_tokens,
                "computed": self.computed_tokens,
                "cached": self.cached_tokens,
                "hit": 100 * self.cached_share,
            }
            if self.transferred_tokens:
                return later(
                    "of ~%(prompt)d prompt tokens per request, ~%(computed)d computed, ~%(cached)d read "
                    "from the prefix cache (%(hit).0f%%) and ~%(transferred)d transferred from another "
                    "engine's KV cache",
                    transferred=self.transferred_tokens,
                    **values,
                )
            return later(
                "of ~%(prompt)d prompt tokens per request, ~%(computed)d computed and ~%(cached)d read "
                "from the prefix cache (%(hit).0f%% hit rate)",
                **values,
            )
        return later(
            "%(computed).0f%% of prompt tokens computed, %(cached).0f%% read from the prefix cache",
            computed=100 * self.computed_share,
            cached=100 * (self.cached_share + self.transferred_share),
        )


@dataclass(frozen=True, kw_only=True)
class Part:
    key: str
    status: Status
    seconds: float | None = None
    share: float | None = None  # of the split total, 0..1
    note: Message | None = None  # how it was measured, or why it was not

    @property
    def label(self) -> Message:
        return LABELS[self.key]

    @property
    def colour(self) -> str:
        return COLOURS[self.key]

    @property
    def measured(self) -> bool:
        return self.status == MEASURED

    @property
    def seconds_text(self) -> str:
        """The seconds as the page writes them ("4.8", "0.002"); "" when not measured."""
        return f"{nice(self.seconds):g}" if self.seconds is not None else ""

    @property
    def percent(self) -> int | None:
        return round(100 * self.share) if self.share is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "status": self.status,
            "seconds": self.seconds,
            "share": self.share,
            "note": self.note.to_json() if self.note else None,
        }


@dataclass(frozen=True)
class Segment:
    """One part's piece of the stacked bar, in percent of its width."""

    key: str
    x: str
    width: str
    colour: str
    part: Part


@dataclass(frozen=True, kw_only=True)
class Breakdown:
    ttft_s: float | None  # the stream probe's TTFT
    total_s: float | None  # what is split: the TTFT, plus the gateway gap when the probe went direct
    parts: tuple[Part, ...]
    cause: str | None  # the key of the largest part
    sentence: Message
    cache: CacheSplit | None = None
    notes: tuple[Message, ...] = field(default_factory=tuple)

    @property
    def available(self) -> bool:
        """Whether there is a TTFT to split."""
        return self.total_s is not None

    def part(self, key: str) -> Part:
        return next(p for p in self.parts if p.key == key)

    @property
    def segments(self) -> list[Segment]:
        """The measured parts with time in them, as pieces of a 100-wide stacked bar."""
        shown = [p for p in self.parts if p.measured and p.share]
        segments, at = [], 0.0
        for part in shown:
            width = 100 * (part.share or 0.0)
            segments.append(Segment(part.key, f"{at:.2f}", f"{width:.2f}", part.colour, part))
            at += width
        return segments

    def to_json(self) -> dict[str, Any]:
        return {
            "ttft_s": self.ttft_s,
            "total_s": self.total_s,
            "cause": self.cause,
            "sentence": self.sentence.to_json(),
            "parts": [p.to_json() for p in self.parts],
            "notes": [n.to_json() for n in self.notes],
        }


def nice(seconds: float) -> float:
    """Seconds rounded for reading (shown with %g): 12, 6.1, 0.35, 0.004."""
    if seconds >= 10:
        return float(round(seconds))
    if seconds >= 1:
        return round(seconds, 1)
    if seconds >= 0.1:
        return round(seconds, 2)
    return round(seconds, 3)


def _number(value: Any) -> float | None:
    """A finite number from the inputs; None for missing, NaN or infinite values."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _seconds(value: Any) -> float | None:
    number = _number(value)
    return max(number, 0.0) if number is not None else None


# --- the parts, one function each -------------------------------------------------------------


def _connect(i: TtftInputs) -> Part:
    if i.reused_connection:
        return Part(key="connect", status=MEASURED, seconds=0.0, note=later("the connection was reused"))
    connect = _seconds(i.connect_s)
    if connect is None:
        return Part(key="connect", status=NOT_MEASURED, note=later("no connect time from the health probe"))
    return Part(
        key="connect", status=MEASURED, seconds=connect, note=later("from the health probe's request")
    )


def _tls(i: TtftInputs) -> Part:
    if i.https is False:
        return Part(key="tls", status=NOT_APPLICABLE, note=later("plain HTTP: no TLS"))
    if i.reused_connection:
        return Part(key="tls", status=MEASURED, seconds=0.0, note=later("the connection was reused"))
    connect, tls = _seconds(i.connect_s), _seconds(i.tls_s)
    if tls is None or connect is None:
        if i.https is None and connect is not None:
            return Part(key="tls", status=NOT_APPLICABLE, note=later("no TLS handshake in the health probe"))
        return Part(key="tls", status=NOT_MEASURED, note=later("no TLS timing from the health probe"))
    return Part(
        key="tls",
        status=MEASURED,
        seconds=max(tls - connect, 0.0),
        note=later("from the health probe's request"),
    )


def _gateway(i: TtftInputs) -> Part:
    through, direct = _seconds(i.gateway_ttfb_s), _seconds(i.direct_ttfb_s)
    if through is not None and direct is not None:
        gap = max(through - direct, 0.0)
        note = later(
            "TTFB %(through)g s through %(gateway)s − %(direct)g s straight to the engine",
            through=nice(through),
            gateway=i.gateway or later("the gateway"),
            direct=nice(direct),
        )
        return Part(key="gateway", status=MEASURED, seconds=gap, note=note)
    if not i.gateway:
        return Part(key="gateway", status=NOT_APPLICABLE, note=later("no gateway in front of this instance"))
    if i.ttft_through_gateway:
        note = later(
            "the probes reach the engine only through %(gateway)s: no direct TTFB to compare",
            gateway=i.gateway,
        )
    elif i.gateway_error:
        note = later(
            "the one-token request through %(gateway)s got no answer: %(error)s",
            gateway=i.gateway,
            error=i.gateway_error,
        )
    else:
        note = later(
            "not timed through %(gateway)s yet: the next health probe times it",
            gateway=i.gateway,
        )
    return Part(key="gateway", status=NOT_MEASURED, note=note)


def _queue(i: TtftInputs) -> Part:
    queue = _seconds(i.queue_s)
    if queue is None:
        return Part(
            key="queue",
            status=NOT_MEASURED,
            note=later("no queue-time histogram from the engine, or no request finished in its last window"),
        )
    return Part(
        key="queue",
        status=MEASURED,
        seconds=queue,
        note=_window_note(i, later("the engine's mean queue time")),
    )


def _prefill(i: TtftInputs, cache: CacheSplit | None) -> Part:
    prefill = _seconds(i.prefill_s)
    if prefill is None:
        return Part(
            key="prefill",
            status=NOT_MEASURED,
            note=later(
                "no prefill-time histogram from the engine, or no request finished in its last window"
            ),
        )
    note = _window_note(i, later("the engine's mean prefill time"))
    if cache is not None:
        note = later("%(first)s; %(then)s", first=note, then=cache.note)
    return Part(key="prefill", status=MEASURED, seconds=prefill, note=note)


def _window_note(i: TtftInputs, what: Message) -> Message:
    window = _seconds(i.window_s)
    if window:
        return later("%(what)s over the last %(window).0f s", what=what, window=window)
    return what


def cache_split(i: TtftInputs) -> CacheSplit | None:
    """Prompt tokens computed vs cached: from vLLM's prompt_tokens_by_source when the engine
    exports it, else from its prefix-cache queries and hits (both count tokens)."""
    computed, cached = _seconds(i.computed_tokens_per_s), _seconds(i.cached_tokens_per_s)
    transferred = _seconds(i.transferred_tokens_per_s) or 0.0
    if computed is not None and cached is not None and computed + cached + transferred > 0:
        total = computed + cached + transferred
        shares = (computed / total, cached / total, transferred / total)
        source: Literal["prompt_tokens_by_source", "prefix_cache"] = "prompt_tokens_by_source"
    else:
        queries, hits = _seconds(i.prefix_cache_queries_per_s), _seconds(i.prefix_cache_hits_per_s)
        if not queries or hits is None:
            return None
        hit = min(hits / queries, 1.0)
        shares, source = (1.0 - hit, hit, 0.0), "prefix_cache"
    prompt = _seconds(i.prompt_tokens_mean)
    if prompt is None:
        return CacheSplit(
            computed_share=shares[0], cached_share=shares[1], transferred_share=shares[2], source=source
        )
    return CacheSplit(
        computed_share=shares[0],
        cached_share=shares[1],
        transferred_share=shares[2],
        source=source,
        prompt_tokens=round(prompt),
        computed_tokens=round(prompt * shares[0]),
        cached_tokens=round(prompt * shares[1]),
        transferred_tokens=round(prompt * shares[2]),
    )


# --- the sentence -----------------------------------------------------------------------------


def _phrase(part: Part, cache: CacheSplit | None, *, cause: bool) -> Message:
    s = nice(part.seconds or 0.0)
    if not cause:
        return {
            "connect": later("%(s)g s connecting", s=s),
            "tls": later("%(s)g s in the TLS handshake", s=s),
            "gateway": later("%(s)g s in the gateway", s=s),
            "queue": later("%(s)g s queued", s=s),
            "prefill": later("%(s)g s prefill", s=s),
            "other": later("%(s)g s other", s=s),
        }[part.key]
    if part.key == "prefill" and cache is not None and cache.prompt_tokens is not None:
        return later(
            "%(s)g s prefill (computing ~%(computed)d of ~%(prompt)d prompt tokens per request; "
            "~%(cached)d cached)",
            s=s,
            computed=cache.computed_tokens,
            prompt=cache.prompt_tokens,
            cached=cache.cached_tokens,
        )
    return {
        "connect": later("%(s)g s connecting (DNS and TCP: the network path)", s=s),
        "tls": later("%(s)g s in the TLS handshake (the network path or the server's TLS setup)", s=s),
        "gateway": later("%(s)g s in the gateway (more than calling the engine directly)", s=s),
        "queue": later("%(s)g s queued (waiting for capacity)", s=s),
        "prefill": later("%(s)g s prefill (computing the prompt)", s=s),
        "other": later(
            "%(s)g s not explained by the measured parts (tokenizing, the API server, the first decode "
            "step, or a probe slower than the engine's average)",
            s=s,
        ),
    }[part.key]


def _listed(messages: Iterable[Message]) -> Message | None:
    """Messages joined by the language's list comma (the msgid fleet.probes.evidence uses)."""
    found: Message | None = None
    for message in messages:
        found = message if found is None else later("%(first)s, %(then)s", first=found, then=message)
    return found


def _sentence(
    total: float | None, parts: list[Part], cause: Part | None, cache: CacheSplit | None
) -> Message:
    if total is None:
        return later("TTFT not measured: the stream probe has no first token to split")
    if cause is None:
        return later("TTFT %(total)g s: no part of it measured", total=nice(total))
    named = [cause] + [
        p
        for p in sorted(parts, key=lambda p: -(p.seconds or 0.0))
        if p is not cause and p.measured and (p.share or 0.0) >= NAMED_SHARE
    ][: MAX_NAMED - 1]
    phrases = [_phrase(p, cache, cause=p is cause) for p in named]
    sentence = later("TTFT %(total)g s: %(parts)s", total=nice(total), parts=_listed(phrases))
    missing = [p.label for p in parts if p.status == NOT_MEASURED and p.key in ("queue", "prefill")]
    if cause.key == "other" and missing:
        sentence = later("%(sentence)s; not measured: %(parts)s", sentence=sentence, parts=_listed(missing))
    return sentence


# --- the split --------------------------------------------------------------------------------


def split(inputs: TtftInputs) -> Breakdown:
    """The TTFT split into its parts, the largest named as the cause."""
    cache = cache_split(inputs)
    known = [_connect(inputs), _tls(inputs), _gateway(inputs), _queue(inputs), _prefill(inputs, cache)]
    ttft = _seconds(inputs.ttft_s)
    notes: list[Message] = []
    gap = known[2].seconds if known[2].measured else None
    total = ttft
    if ttft is not None and gap and not inputs.ttft_through_gateway:
        total = ttft + gap
        notes.append(
            later(
                "The stream probe went straight to the engine; a client calling through the gateway "
                "waits about %(gap)g s more, so the split is of %(total)g s.",
                gap=nice(gap),
                total=nice(total),
            )
        )
    explained = sum(p.seconds or 0.0 for p in known if p.measured)
    if total is None:
        other = Part(key="other", status=NOT_MEASURED, note=later("no TTFT from the stream probe"))
        parts = known + [other]
        return Breakdown(
            ttft_s=None,
            total_s=None,
            parts=tuple(parts),
            cause=None,
            sentence=_sentence(None, parts, None, cache),
            cache=cache,
        )
    other = Part(
        key="other",
        status=MEASURED,
        seconds=max(total - explained, 0.0),
        note=later("the TTFT minus the measured parts"),
    )
    whole = max(total, explained)
    if explained > total * OVERSHOOT:
        notes.append(
            later(
                "The measured parts add up to %(parts)g s, more than this probe's TTFT of %(ttft)g s: queue "
                "and prefill are the engine's averages over its window, the TTFT is one request.",
                parts=nice(explained),
                ttft=nice(total),
            )
        )
    parts = [
        replace(p, share=(p.seconds or 0.0) / whole if p.measured and whole > 0 else None)
        for p in [*known, other]
    ]
    cause = _largest(parts)
    return Breakdown(
        ttft_s=ttft,
        total_s=total,
        parts=tuple(parts),
        cause=cause.key if cause else None,
        sentence=_sentence(total, parts, cause, cache),
        cache=cache,
        notes=tuple(notes),
    )


def _largest(parts: list[Part]) -> Part | None:
    """The measured part with the most time (the earlier one on a tie); None when none has any."""
    best: Part | None = None
    for part in parts:
        if part.measured and (part.seconds or 0.0) > 0 and (best is None or part.seconds > best.seconds):
            best = part
    return best


# --- reading the probes' stored results -----------------------------------------------------


def inputs_from_results(
    *,
    phases: Mapping[str, Any] | None = None,
    stream: Mapping[str, Any] | None = None,
    derived: Mapping[str, float] | None = None,
    by_source: Mapping[str, str] | None = None,
    **extra: Any,
) -> TtftInputs:
    """Inputs from the probes' JSON: the health probe's phases (PhaseResult.to_dict), the
    stream probe's result (StreamResult.to_dict) and the metrics probe's derived figures
    (fleet.probes.scrape.derive). `by_source` names the derived keys of the prompt-token
    rates by source (PROMPT_SOURCE_KEYS unless given); `extra` sets the other fields (https,
    gateway, ...)."""
    phases, stream, derived = (v if isinstance(v, Mapping) else {} for v in (phases, stream, derived))
    by_source = PROMPT_SOURCE_KEYS if by_source is None else by_source

    def first(*keys: str) -> float | None:
        return next((_number(derived[k]) for k in keys if _number(derived.get(k)) is not None), None)

    def rate(source: str) -> float | None:
        key = by_source.get(source)
        return _number(derived.get(key)) if key else None

    values: dict[str, Any] = {
        "ttft_s": _number(stream.get("ttft_s")),
        "connect_s": _number(phases.get("connect_s")),
        "tls_s": _number(phases.get("tls_s")),
        "reused_connection": bool(phases.get("reused_connection")),
        "queue_s": first("queue_time_mean_s", "queue_time_p50_s"),
        "prefill_s": first("prefill_time_mean_s", "prefill_time_p50_s"),
        "window_s": first("window_s"),
        "prompt_tokens_mean": first("prompt_length_mean"),
        "computed_tokens_per_s": rate("local_compute"),
        "cached_tokens_per_s": rate("local_cache_hit"),
        "transferred_tokens_per_s": rate("external_kv_transfer"),
        "prefix_cache_queries_per_s": first("prefix_cache_queries_per_s"),
        "prefix_cache_hits_per_s": first("prefix_cache_hits_per_s"),
    }
    return TtftInputs(**(values | extra))
