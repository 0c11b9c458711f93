"""What an LLM gateway in nginx must get right, checked on a parsed config (crossplane's
payload): the generator runs these on what it wrote, the linter on what a user pastes.

Each rule reads the *effective* value of a directive in a proxying location, with nginx's
inheritance: a simple directive is inherited from the nearest enclosing level that sets it;
array-like ones (proxy_set_header, error_page, limit_req) only from the nearest level that
has any of them.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

import crossplane
from django.utils.translation import gettext as _

Directive = dict[str, Any]

DEFAULT_READ_TIMEOUT_S = 60.0  # nginx's proxy_read_timeout default
LLM_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/", "/v1", "/")
ARRAY_DIRECTIVES = {"proxy_set_header", "error_page", "limit_req", "limit_conn", "add_header"}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str  # error, warning, info
    line: int | None
    title: str  # title and why in the active language
    why: str
    fix: str  # the corrected snippet (nginx config: never translated)


@dataclass
class Scope:
    """Directives of the enclosing levels (http, server, location), innermost last, each level
    indexed by directive name once: a config of thousands of servers is read in linear time."""

    levels: list[dict[str, list[Directive]]] = field(default_factory=list)

    @classmethod
    def of(cls, *blocks: list[Directive]) -> Scope:
        return cls([_by_name(block) for block in blocks])

    def inner(self, block: list[Directive]) -> Scope:
        return Scope([*self.levels, _by_name(block)])

    def find(self, name: str) -> Directive | None:
        found = self.find_all(name)
        return found[-1] if found else None

    def find_all(self, name: str) -> list[Directive]:
        for level in reversed(self.levels):
            if name in level:
                return level[name]
        return []


def _by_name(block: list[Directive]) -> dict[str, list[Directive]]:
    named: dict[str, list[Directive]] = {}
    for directive in block:
        named.setdefault(directive["directive"], []).append(directive)
    return named


def seconds(value: str) -> float | None:
    """An nginx time value (150, 150s, 2m, 500ms, 1h) in seconds."""
    match = re.fullmatch(r"(\d{1,15})(ms|s|m|h|d)?", value.strip())  # no int() of thousands of digits
    if not match:
        return None
    return int(match[1]) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}[match[2]]


def rate_per_s(value: str) -> float | None:
    match = re.fullmatch(r"rate=(\d{1,15}(?:\.\d{1,15})?)r/(s|m)", value.strip())
    return float(match[1]) / (60 if match[2] == "m" else 1) if match else None


def _count(value: str) -> int | None:
    """A count as nginx writes it (burst=20); None for anything else (nginx refuses it)."""
    return int(value) if re.fullmatch(r"\d{1,15}", value) else None


@dataclass(frozen=True)
class Context:
    longest_generation_s: float = 120.0
    client_read_timeout_s: float | None = None  # known for generated configs


def check(parsed: list[Directive], context: Context | None = None) -> list[Finding]:
    """Every finding for one parsed file (an nginx.conf, or a conf.d file in http context)."""
    context = context or Context()
    http = _http_block(parsed)
    zones = _zones(http)
    maps = _maps(http)
    findings: list[Finding] = []
    top = Scope.of(http)
    for server in (d for d in http if d["directive"] == "server"):
        scope = top.inner(server.get("block", []))
        for location in _proxying_locations(server.get("block", [])):
            inner = scope.inner(location.get("block", []))
            findings += _location_rules(location, inner, context, zones)
    findings += _upstream_rules(http)
    findings += _zone_rules(http, maps)
    return sorted(findings, key=lambda f: (f.line or 0, f.rule))


def _http_block(parsed: list[Directive]) -> list[Directive]:
    """The http block's directives, or the file itself when it is an http-context include."""
    for directive in parsed:
        if directive["directive"] == "http":
            return directive.get("block", [])
    return parsed


def _proxying_locations(block: list[Directive]) -> list[Directive]:
    found = []
    for directive in block:
        if directive["directive"] == "location":
            inner = directive.get("block", [])
            if any(d["directive"] == "proxy_pass" for d in inner):
                found.append(directive)
            found += _proxying_locations(inner)
    return found


def _zones(http: list[Directive]) -> dict[str, tuple[str, float | None, int]]:
    """limit_req_zone name -> (key, rate per second, line)."""
    zones = {}
    for d in http:
        if d["directive"] == "limit_req_zone" and d["args"]:
            name = next((a.split("=", 1)[1].split(":")[0] for a in d["args"] if a.startswith("zone=")), "")
            rate = next((rate_per_s(a) for a in d["args"] if a.startswith("rate=")), None)
            zones[name] = (d["args"][0], rate, d.get("line", 0))
    return zones


def _maps(http: list[Directive]) -> dict[str, tuple[str, int]]:
    """map target variable -> (its default value, line)."""
    maps = {}
    for d in http:
        if d["directive"] == "map" and len(d["args"]) == 2:
            default = next(
                (e["args"][0] for e in d.get("block", []) if e["directive"] == "default" and e["args"]), ""
            )
            maps[d["args"][1]] = (default, d.get("line", 0))
    return maps


def _location_path(location: Directive) -> str:
    return location["args"][-1] if location.get("args") else ""


def _serves_generation(location: Directive) -> bool:
    path = _location_path(location)
    return path in LLM_PATHS or "completions" in path


def _location_rules(
    location: Directive, scope: Scope, context: Context, zones: dict[str, tuple[str, float | None, int]]
) -> list[Finding]:
    if not _serves_generation(location):
        return []
    line, path = location.get("line"), _location_path(location)
    findings = _timeout_rules(scope, context, line, path) + _streaming_rules(scope, line, path)
    return findings + _limit_rules(scope, zones, line, path)


def _timeout_rules(scope: Scope, context: Context, line: int | None, path: str) -> list[Finding]:
    read = scope.find("proxy_read_timeout")
    value = seconds(read["args"][0]) if read and read["args"] else DEFAULT_READ_TIMEOUT_S
    where = read.get("line", line) if read else line
    findings = []
    if value is not None and value <= context.longest_generation_s:
        findings.append(
            Finding(
                "read_timeout_short",
                "error",
                where,
                _(
                    "%(path)s: proxy_read_timeout %(value)ss is not above the longest generation "
                    "(%(longest)ss)"
                )
                % {"path": path, "value": f"{value:g}", "longest": f"{context.longest_generation_s:g}"},
                _(
                    "nginx cuts a non-streamed answer that takes longer with a 504, while the engine "
                    "keeps computing it (the guide's chain: engine < gateway < client)."
                ),
                f"proxy_read_timeout {int(context.longest_generation_s + 30)}s;",
            )
        )
    client = context.client_read_timeout_s
    if value is not None and client is not None and value >= client:
        findings.append(
            Finding(
                "timeout_chain",
                "error",
                where,
                _(
                    "%(path)s: proxy_read_timeout %(value)ss is not below the client's read timeout "
                    "%(client)ss"
                )
                % {"path": path, "value": f"{value:g}", "client": f"{client:g}"},
                _(
                    "The client gives up first and retries while the gateway and engine still work on the "
                    "first attempt: double load exactly when the service is slow."
                ),
                f"proxy_read_timeout {int(max(client - 30, context.longest_generation_s + 1))}s;",
            )
        )
    return findings


def _streaming_rules(scope: Scope, line: int | None, path: str) -> list[Finding]:
    findings = []
    buffering = scope.find("proxy_buffering")
    if not buffering or buffering["args"][:1] != ["off"]:
        findings.append(
            Finding(
                "sse_buffering",
                "error",
                buffering.get("line", line) if buffering else line,
                _("%(path)s: responses are buffered, so streamed tokens arrive in bursts") % {"path": path},
                _(
                    "With proxy_buffering on (the default), nginx holds SSE chunks until a buffer fills: "
                    "time to first token looks like the whole generation."
                ),
                "proxy_buffering off;\nproxy_cache off;",
            )
        )
    version = scope.find("proxy_http_version")
    if not version or version["args"][:1] != ["1.1"]:
        findings.append(
            Finding(
                "http11",
                "warning",
                line,
                _("%(path)s: proxy_http_version is not 1.1") % {"path": path},
                _(
                    "nginx speaks HTTP/1.0 to upstreams by default: no chunked streaming and no upstream "
                    "keepalive."
                ),
                "proxy_http_version 1.1;",
            )
        )
    headers = scope.find_all("proxy_set_header")
    cleared = any(h["args"][:1] == ["Connection"] and h["args"][1:] in ([""], ["''"]) for h in headers)
    if not cleared:
        findings.append(
            Finding(
                "connection_header",
                "warning",
                line,
                _("%(path)s: the Connection header is not cleared") % {"path": path},
                _(
                    "Without Connection \"\" nginx sends 'Connection: close' upstream and the keepalive pool "
                    "is never used. A proxy_set_header in a location also drops every one set above it."
                ),
                'proxy_set_header Connection "";',
            )
        )
    return findings


def _limit_rules(
    scope: Scope, zones: dict[str, tuple[str, float | None, int]], line: int | None, path: str
) -> list[Finding]:
    limits = scope.find_all("limit_req")
    if not limits:
        return []
    findings = []
    for limit in limits:
        zone = next((a.split("=", 1)[1] for a in limit["args"] if a.startswith("zone=")), "")
        burst = next((_count(a.split("=", 1)[1]) for a in limit["args"] if a.startswith("burst=")), 0)
        if burst is None:  # not a count: nginx itself refuses the config
            continue
        rate = zones.get(zone, ("", None, 0))[1]
        where = limit.get("line", line)
        if burst == 0:
            findings.append(
                Finding(
                    "burst_zero",
                    "warning",
                    where,
                    _("%(path)s: limit_req zone=%(zone)s has no burst") % {"path": path, "zone": zone},
                    _(
                        "Without a burst, two requests in the same instant from one client already exceed "
                        "the rate and the second gets 429: normal client concurrency is refused."
                    ),
                    f"limit_req zone={zone} burst={int(max(rate or 1, 1) * 2)} nodelay;",
                )
            )
        elif rate and burst > 10 * rate:
            findings.append(
                Finding(
                    "burst_vs_rate",
                    "warning",
                    where,
                    _("%(path)s: burst %(burst)s is more than 10 s of the zone's rate (%(rate)s r/s)")
                    % {"path": path, "burst": burst, "rate": f"{rate:g}"},
                    _(
                        "A burst that large lets one client put hundreds of requests on the engine at once: "
                        "the queue, not the limit, absorbs the spike."
                    ),
                    f"limit_req zone={zone} burst={int(rate * 2)} nodelay;",
                )
            )
    status = scope.find("limit_req_status")
    if not status or status["args"][:1] != ["429"]:
        findings.append(
            Finding(
                "limit_req_status",
                "warning",
                status.get("line", line) if status else line,
                _("%(path)s: limited requests get %(status)s, not 429")
                % {"path": path, "status": status["args"][0] if status else "503"},
                _(
                    "nginx answers 503 by default: clients and alerts read it as the engine being down, "
                    "and SDKs do not back off as they do on 429."
                ),
                "limit_req_status 429;",
            )
        )
    pages = scope.find_all("error_page")
    if not any("429" in page["args"] for page in pages):
        findings.append(
            Finding(
                "json_429",
                "warning",
                line,
                _("%(path)s: a rate-limited request gets nginx's HTML page") % {"path": path},
                _("OpenAI clients expect a JSON error body; an HTML 429 surfaces as a parse error."),
                "error_page 429 = @rate_limited;\n"
                "location @rate_limited {\n"
                "    default_type application/json;\n"
                "    add_header Retry-After 1 always;\n"
                '    return 429 \'{"error":{"message":"Rate limit exceeded. Please retry after a short '
                'wait.","type":"rate_limit_error","code":"rate_limit_exceeded"}}\';\n'
                "}",
            )
        )
    return findings


def _upstream_rules(http: list[Directive]) -> list[Finding]:
    findings = []
    for upstream in (d for d in http if d["directive"] == "upstream"):
        block = upstream.get("block", [])
        if not any(d["directive"] == "keepalive" for d in block):
            findings.append(
                Finding(
                    "upstream_keepalive",
                    "warning",
                    upstream.get("line"),
                    _("upstream %(name)s keeps no idle connections") % {"name": upstream["args"][0]},
                    _(
                        "Every request opens a new TCP connection to the engine: added latency, and under "
                        "load the gateway runs out of local ports (TIME_WAIT)."
                    ),
                    "keepalive 64;",
                )
            )
    return findings


def _zone_rules(http: list[Directive], maps: dict[str, tuple[str, int]]) -> list[Finding]:
    findings = []
    for name, (key, _rate, line) in _zones(http).items():
        default = maps.get(key, (None, 0))[0]
        if default not in (None, "", "''", '""') and not default.startswith("$"):
            findings.append(
                Finding(
                    "shared_anonymous_bucket",
                    "warning",
                    line,
                    _(
                        "zone %(name)s: every client without an API key shares one bucket "
                        "(%(key)s defaults to %(default)s)"
                    )
                    % {"name": name, "key": key, "default": repr(default)},
                    _(
                        "One busy anonymous client then rate-limits all the others (corrections #15). "
                        "An empty key is not counted by the zone; the per-IP zone still limits them."
                    ),
                    f'map ... {key} {{\n    default "";\n    ...\n}}',
                )
            )
    return findings


def parse_text(text: str) -> dict[str, Any]:
    """crossplane's parse of config text (it reads files): one file, includes not followed."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "nginx.conf")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        return crossplane.parse(path, single=True, catch_errors=True, comments=False, check_ctx=False)
