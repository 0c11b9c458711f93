"""The story an nginx access log tells, told first: the status mix, then the causes of the bad
responses ranked by how many of them each explains. A 429 spike from one client (rate
limiting, 限流) outranks a handful of 502s (server errors); 504s are gateway timeouts waiting
for the upstream, not a fault of the gateway itself (the guide, 5.1 and appendix A).

The story is data (kinds, counts, who, when) so that a stored result can be told again in
the reader's language: `describe()` words it at display time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy

from diagnostics.triage.access_log import OTHER, AccessStats, Counts

ONE_CLIENT_SHARE = 0.5  # one client (IP or API key) with at least half the 429s is "the" cause
MIN_SPIKE = 10  # fewer 429s than this are not called a spike, whoever got them
ONE_UPSTREAM_SHARE = 0.5  # one upstream with at least half the failures is named
SPAN_SHARE = 0.9  # "between 14:00 and 14:05": the minutes that hold at least 90 % of the count,
STRAY_SHARE = 0.1  # less its stray minutes at either end (under 10 % of the busiest minute)
CLASSES = ("2xx", "3xx", "4xx", "429", "5xx")
OK, WARN, BAD = "ok", "warn", "bad"
WINDOW_FORMAT = "%Y-%m-%d %H:%M"  # as access_log names windows
BAD_SHARE = 0.01  # bad responses above 1 % of the requests make the story "bad", not "warn"


@dataclass(frozen=True)
class Cause:
    """One explanation of bad responses: `explained` is how many of them it accounts for."""

    kind: str
    explained: int
    categories: tuple[str, ...]  # taxonomy categories this story points at, most specific first
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Story:
    requests: int
    mix: list[dict[str, Any]]
    causes: list[Cause]
    timeline: dict[str, dict[str, int]]  # window -> status class -> requests
    timed: bool  # the log holds request times: "no slow requests" means something

    @property
    def verdict(self) -> str:
        if not self.causes:
            return OK
        bad = sum(c.explained for c in self.causes)
        return BAD if bad >= BAD_SHARE * self.requests else WARN

    @property
    def lead(self) -> Cause | None:
        return self.causes[0] if self.causes else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "requests": self.requests,
            "mix": self.mix,
            "causes": [{**asdict(c), "categories": list(c.categories)} for c in self.causes],
            "timeline": self.timeline,
            "timed": self.timed,
        }


def status_class(status: int) -> str:
    return "429" if status == 429 else f"{status // 100}xx"


def tell(*, stats: AccessStats) -> Story:
    """The access log's story: status mix, timeline, and the causes ranked by the bad
    responses each explains (ties: rate limiting from one client first)."""
    causes = [
        cause
        for cause in (
            _rate_limit(stats),
            # A 502/504 is nginx reporting what the upstream did; the error log's line that says
            # which (refused, reset, timed out connecting) is the more specific finding.
            _by_codes(
                stats,
                kind="upstream_timeout",
                codes={504},
                categories=("timeout.ttft", "timeout.connect", "timeout.tps", "server.5xx"),
            ),
            _by_codes(
                stats,
                kind="bad_gateway",
                codes={502, 503},
                categories=("process.not_started", "timeout.network", "server.5xx"),
            ),
            _by_codes(stats, kind="server_error", codes=_other_5xx(stats), categories=("server.5xx",)),
            _by_codes(stats, kind="client_gave_up", codes={499}, categories=("timeout.ttft",)),
            _slow(stats),
        )
        if cause is not None
    ]
    order = {cause.kind: i for i, cause in enumerate(causes)}
    causes.sort(key=lambda c: (-c.explained, order[c.kind]))
    return Story(
        requests=stats.lines,
        mix=_mix(stats.statuses),
        causes=causes,
        timeline=_timeline(stats.per_window_status),
        timed=stats.timed > 0,
    )


def _mix(statuses: Counter[int]) -> list[dict[str, Any]]:
    total = sum(statuses.values())
    by_class: Counter[str] = Counter()
    for status, n in statuses.items():
        by_class[status_class(status)] += n
    return [
        {"class": name, "count": by_class[name], "share": round(by_class[name] / total, 3) if total else 0}
        for name in CLASSES
        if by_class[name] or name != "3xx"
    ]


def _timeline(per_window_status: dict[str, Counter[int]]) -> dict[str, dict[str, int]]:
    timeline = {}
    for window, statuses in sorted(per_window_status.items()):
        row = dict.fromkeys(CLASSES, 0)
        for status, n in statuses.items():
            row[status_class(status)] = row.get(status_class(status), 0) + n
        timeline[window] = row
    return timeline


def _rate_limit(stats: AccessStats) -> Cause | None:
    """429s: a spike from one client (the top IP or API key holds at least half), or not."""
    total = stats.statuses[429]
    if not total:
        return None
    candidates = [
        ("ip", *_top_limited(stats.per_ip), stats.per_window_ip),
        ("key", *_top_limited(stats.per_key), stats.per_window_key),
    ]
    kind, who, count, series = max(candidates, key=lambda c: c[2])
    if count >= max(MIN_SPIKE, ONE_CLIENT_SHARE * total) and who != OTHER:
        windows = Counter({w: c.limited for (w, name), c in series.items() if name == who and c.limited})
        start, end = _when(windows, stats.window_minutes)
        params = {"who": who, "who_kind": kind, "count": count, "total": total, "share": count / total}
        return Cause(
            "rate_limit_one_client", count, ("rate_limit.http_429",), {**params, "start": start, "end": end}
        )
    clients = sum(1 for c in stats.per_ip.values() if c.limited)
    params = {"count": total, "clients": clients, "share": total / stats.lines}
    return Cause("rate_limit", total, ("rate_limit.http_429",), params)


def _top_limited(per: dict[str, Counts]) -> tuple[str, int]:
    if not per:
        return "", 0
    who, counts = max(per.items(), key=lambda item: item[1].limited)
    return who, counts.limited


def _other_5xx(stats: AccessStats) -> set[int]:
    return {s for s in stats.statuses if s >= 500 and s not in (502, 503, 504)}


def _by_codes(stats: AccessStats, *, kind: str, codes: set[int], categories: tuple[str, ...]) -> Cause | None:
    """Responses with these codes: how many, when, and the upstream most of them came from."""
    count = sum(stats.statuses[s] for s in codes)
    if not count:
        return None
    windows = Counter({w: sum(st[s] for s in codes) for w, st in stats.per_window_status.items()})
    start, end = _when(+windows, stats.window_minutes)
    params: dict[str, Any] = {
        "count": count,
        "share": count / stats.lines,
        "codes": ", ".join(f"{s} × {stats.statuses[s]}" for s in sorted(codes) if stats.statuses[s]),
        "start": start,
        "end": end,
    }
    per_upstream = Counter({u: sum(st[s] for s in codes) for u, st in stats.per_upstream.items()})
    params.update(_focus(+per_upstream, count))
    return Cause(kind, count, categories, params)


def _slow(stats: AccessStats) -> Cause | None:
    """Answered requests that took slow_seconds or more (request_time, else upstream time)."""
    count = sum(n for seconds, n in stats.seconds.items() if seconds >= stats.slow_seconds)
    if not count:
        return None
    start, end = _when(stats.slow_per_window, stats.window_minutes)
    params: dict[str, Any] = {
        "count": count,
        "seconds": stats.slow_seconds,
        "share": count / stats.lines,
        "p95": percentile(stats.seconds, 0.95),
        "start": start,
        "end": end,
    }
    params.update(_focus(stats.slow_per_upstream, count))
    return Cause("slow", count, ("timeout.ttft", "timeout.tps"), params)


def _focus(per_upstream: Counter[str], count: int) -> dict[str, Any]:
    """The upstream that holds most of `count`, when one does."""
    if not per_upstream:
        return {}
    upstream, n = per_upstream.most_common(1)[0]
    if upstream == OTHER or n < ONE_UPSTREAM_SHARE * count:
        return {}
    return {"upstream": upstream, "upstream_share": n / count}


def span(per_window: Counter[str]) -> tuple[str, str]:
    """The first and last window of the count, trimmed at either end of stray windows (under
    STRAY_SHARE of the busiest one) while the rest keeps SPAN_SHARE of the count: a stray 429
    an hour before does not stretch the span, an even spread is not cut."""
    windows = sorted(w for w, n in per_window.items() if n)
    if not windows:
        return "", ""
    counts = [per_window[w] for w in windows]
    keep, stray = SPAN_SHARE * sum(counts), STRAY_SHARE * max(counts)
    lo, hi, held = 0, len(windows) - 1, sum(counts)
    while lo < hi:
        end = lo if counts[lo] <= counts[hi] else hi
        if counts[end] >= stray or held - counts[end] < keep:
            break
        held -= counts[end]
        lo, hi = (lo + 1, hi) if end == lo else (lo, hi - 1)
    return windows[lo], windows[hi]


def _when(per_window: Counter[str], window_minutes: int) -> tuple[str, str]:
    """The span's start and its end (the end of its last window)."""
    first, last = span(per_window)
    if not last:
        return "", ""
    end = datetime.strptime(last, WINDOW_FORMAT) + timedelta(minutes=window_minutes)
    return first, end.strftime(WINDOW_FORMAT)


def percentile(seconds: Counter[int], q: float) -> int:
    """The q-quantile of whole seconds (the lower bound of its second)."""
    total = sum(seconds.values())
    seen = 0
    for value in sorted(seconds):
        seen += seconds[value]
        if seen >= q * total:
            return value
    return 0


# Wording, at display time, in the reader's language.
HEADLINES = {
    "rate_limit_one_client": _(
        "Rate limiting (429 spike): %(share)s of the 429s came from %(who_label)s %(who)s "
        "between %(start)s and %(end)s"
    ),
    "rate_limit": ngettext_lazy(
        "Rate limiting: %(count)s requests answered 429, from %(clients)s client",
        "Rate limiting: %(count)s requests answered 429, from %(clients)s clients",
        "clients",
    ),
    "upstream_timeout": _("Gateway timeouts (504): %(count)s requests timed out waiting for the upstream"),
    "bad_gateway": _("Upstream unavailable (502/503): %(count)s requests found no working upstream"),
    "server_error": _("Server errors (5xx): the upstream answered %(count)s requests with an error"),
    "client_gave_up": _("Clients gave up (499): %(count)s requests closed before the upstream answered"),
    "slow": _("Slow requests: %(count)s answered requests took %(seconds)s s or more"),
}
# The same, when one upstream holds most of them.
HEADLINES_ON_UPSTREAM = {
    "upstream_timeout": _(
        "Gateway timeouts (504): %(count)s requests timed out waiting for upstream %(upstream)s "
        "(%(upstream_share)s of them)"
    ),
    "bad_gateway": _(
        "Upstream unavailable (502/503): %(count)s requests failed on upstream %(upstream)s "
        "(%(upstream_share)s of them)"
    ),
    "server_error": _(
        "Server errors (5xx): upstream %(upstream)s answered %(count)s requests with an error "
        "(%(upstream_share)s of them)"
    ),
    "slow": _(
        "Slow requests: %(count)s answered requests took %(seconds)s s or more, %(upstream_share)s of "
        "them on upstream %(upstream)s"
    ),
}
FIXES = {
    "rate_limit_one_client": _(
        "This is rate limiting (限流), not a server error: nginx limit_req rejected one client that sent "
        "too fast. Ask its owner to back off (honour Retry-After, cap its concurrency) or give batch "
        "clients their own limit_req zone; raise rate or burst only if the load is legitimate."
    ),
    "rate_limit": _(
        "This is rate limiting (限流), not a server error: the limit is below the overall load. If the "
        "load is legitimate, raise limit_req rate or burst and add capacity; check the engine's queue "
        "(--max-num-seqs) as the second layer."
    ),
    "upstream_timeout": _(
        "nginx waited proxy_read_timeout without an answer: stream responses, set proxy_read_timeout "
        "above the slowest generation, and look at the upstream's queue and GPU load in those minutes."
    ),
    "bad_gateway": _(
        "The upstream refused or was down: check that the engine process is alive (an OOM kill in "
        "dmesg?) and the load balancer's health checks, then read its log of the same minutes."
    ),
    "server_error": _(
        "Read the engine log of the same minutes: vLLM answers 500 when its engine core died, and the "
        "fatal line before the 500s is the cause."
    ),
    "client_gave_up": _(
        "Clients closed the connection first: their timeout is shorter than the generation. Stream "
        "responses or raise the client timeout; look for slow requests and queueing upstream."
    ),
    "slow": _(
        "Long requests without errors: tell slow prefill (time to first token) from slow generation; "
        "stream, cap prompt length, or scale out before they become 504s."
    ),
}
WHO = {"ip": _("client"), "key": _("API key")}


def describe(story: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored story with its words: a headline (the lead cause, or that nothing is wrong),
    and for each cause its sentence, the fix and where it happened."""
    if not story:
        return None
    causes = [_describe_cause(c, story["requests"]) for c in story["causes"]]
    if causes:
        headline = causes[0]["headline"]
    elif story["timed"]:
        headline = _(
            "Nothing wrong: no rate limiting, no server errors and no slow requests in %(n)s requests"
        )
        headline = headline % {"n": f"{story['requests']:,}"}
    else:
        headline = _("Nothing wrong: no rate limiting and no server errors in %(n)s requests") % {
            "n": f"{story['requests']:,}"
        }
    windows = list(story["timeline"])
    period = f"{windows[0]}–{_clock(windows[-1])}" if windows else ""
    mix = [{**row, "percent": percent(row["share"])} for row in story["mix"]]
    return {**story, "headline": headline, "described": causes, "period": period, "mix": mix}


def _describe_cause(cause: dict[str, Any], requests: int) -> dict[str, Any]:
    raw = cause["params"]
    params = {
        **raw,
        "share": percent(raw.get("share", 0)),
        "who_label": WHO.get(raw.get("who_kind", ""), ""),
        "upstream_share": percent(raw.get("upstream_share", 0)),
        "start": _clock(raw.get("start", "")),
        "end": _clock(raw.get("end", "")),
    }
    for key in ("count", "total"):
        if key in params:
            params[key] = f"{params[key]:,}"
    return {
        "kind": cause["kind"],
        "headline": _headline(cause["kind"], upstream=bool(raw.get("upstream"))) % params,
        "fix": FIXES[cause["kind"]],
        "explained": cause["explained"],
        "of_requests": percent(cause["explained"] / requests if requests else 0),
        "start": params["start"],
        "end": params["end"],
        "who": raw.get("who", ""),
        "upstream": raw.get("upstream", ""),
        "upstream_share": params["upstream_share"],
        "codes": raw.get("codes", ""),
        "p95": raw.get("p95"),
    }


def _headline(kind: str, *, upstream: bool) -> Any:
    return HEADLINES_ON_UPSTREAM[kind] if upstream and kind in HEADLINES_ON_UPSTREAM else HEADLINES[kind]


def percent(share: float) -> str:
    """87 %, or < 1 % rather than a 0 % that hides a few."""
    if 0 < share < 0.01:
        return "< 1 %"
    return f"{round(share * 100)} %"


def _clock(window: str) -> str:
    """'2026-12-03 14:05' -> '14:05': the date is said once, beside the headline."""
    return window.rpartition(" ")[2]


def lead_categories(story: Story | None) -> Iterable[str]:
    return story.lead.categories if story and story.lead else ()
