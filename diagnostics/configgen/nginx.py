"""An nginx gateway in front of vLLM: upstreams with keepalive, layered timeouts, SSE done
right, rate limits per client IP and per API key (a zone of its own for batch workers),
connection limits, OpenAI-format JSON errors that leak nothing, per-endpoint policies.

Written as a crossplane payload and built by crossplane, so quoting is crossplane's; every
value in it was checked by diagnostics.configgen.safety first. The file is an http-context
include (conf.d/llm-gateway.conf).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import crossplane
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, pgettext_lazy

from diagnostics.configgen import nginx_rules, safety
from diagnostics.configgen.base import Check, ConfigFile, Field, Generator, flag, lines

D = dict[str, Any]

_SERVER, _UPSTREAM = (
    pgettext_lazy("config generator", "Server"),
    pgettext_lazy("config generator", "Upstream"),
)
_TIMEOUTS, _LIMITS = (
    pgettext_lazy("config generator", "Timeouts"),
    pgettext_lazy("config generator", "Rate limits"),
)
FIELDS: tuple[Field, ...] = (
    Field("server_name", "`server_name`", "llm-api.example.com", group=_SERVER),
    Field("listen_port", pgettext_lazy("config generator", "listen port"), "80", kind="int", group=_SERVER),
    Field(
        "tls",
        "TLS",
        "off",
        kind="bool",
        group=_SERVER,
        help=gettext_lazy("listen 443 ssl, and a redirect on 80."),
    ),
    Field("tls_certificate", "`ssl_certificate`", "/etc/nginx/ssl/cert.pem", group=_SERVER),
    Field("tls_certificate_key", "`ssl_certificate_key`", "/etc/nginx/ssl/key.pem", group=_SERVER),
    Field(
        "upstream_name", pgettext_lazy("config generator", "upstream name"), "vllm_backend", group=_UPSTREAM
    ),
    Field(
        "upstream_servers",
        pgettext_lazy("config generator", "upstream servers"),
        "10.0.1.10:8000\n10.0.1.11:8000",
        kind="lines",
        help=gettext_lazy("host:port, one per line."),
        group=_UPSTREAM,
    ),
    Field(
        "balancing",
        pgettext_lazy("config generator", "balancing"),
        "least_conn",
        kind="choice",
        group=_UPSTREAM,
        choices=(
            ("least_conn", gettext_lazy("least_conn (long requests differ a lot)")),
            ("round_robin", gettext_lazy("round robin")),
            ("ip_hash", "ip_hash"),
            ("random", gettext_lazy("random two least_conn")),
        ),
    ),
    Field("keepalive", gettext_lazy("keepalive connections"), "64", kind="int", group=_UPSTREAM),
    Field("max_fails", "`max_fails`", "3", kind="int", group=_UPSTREAM),
    Field("fail_timeout", "`fail_timeout`", "30s", group=_UPSTREAM),
    Field("client_header_timeout", "`client_header_timeout`", "10s", group=_TIMEOUTS),
    Field("client_body_timeout", "`client_body_timeout`", "30s", group=_TIMEOUTS),
    Field("proxy_connect_timeout", "`proxy_connect_timeout`", "10s", group=_TIMEOUTS),
    Field("proxy_send_timeout", "`proxy_send_timeout`", "30s", group=_TIMEOUTS),
    Field(
        "proxy_read_timeout",
        "`proxy_read_timeout`",
        "150s",
        group=_TIMEOUTS,
        help=gettext_lazy("Above the longest generation, below the client's read timeout."),
    ),
    Field(
        "longest_generation_s",
        gettext_lazy("Longest generation (s)"),
        "120",
        group=_TIMEOUTS,
        help=gettext_lazy("The engine side of the chain: max_tokens / tokens per second."),
    ),
    Field("client_read_timeout_s", gettext_lazy("Client read timeout (s)"), "180", group=_TIMEOUTS),
    Field("rate_per_ip", gettext_lazy("requests/s per client IP"), "30", kind="int", group=_LIMITS),
    Field("burst_per_ip", gettext_lazy("burst per client IP"), "20", kind="int", group=_LIMITS),
    Field("rate_per_key", gettext_lazy("requests/s per API key"), "10", kind="int", group=_LIMITS),
    Field("burst_per_key", gettext_lazy("burst per API key"), "5", kind="int", group=_LIMITS),
    Field(
        "nodelay",
        "`nodelay`",
        "on",
        kind="bool",
        group=_LIMITS,
        help=gettext_lazy("Serve the burst at once instead of spacing it out."),
    ),
    Field(
        "anonymous_key",
        gettext_lazy("requests without an API key"),
        "uncounted",
        kind="choice",
        group=_LIMITS,
        choices=(
            ("uncounted", gettext_lazy("not counted by the key zone (the per-IP zone still limits them)")),
            ("shared", gettext_lazy("one shared 'anonymous' bucket")),
        ),
    ),
    Field("connections_per_ip", gettext_lazy("connections per client IP"), "10", kind="int", group=_LIMITS),
    Field(
        "batch_cidrs",
        gettext_lazy("batch-worker networks"),
        "10.0.4.0/24",
        kind="lines",
        group=_LIMITS,
        help=gettext_lazy(
            "CIDRs of batch clients: limited by a zone of their own instead of the per-IP one."
        ),
    ),
    Field("batch_rate", gettext_lazy("requests/s per batch worker"), "5", kind="int", group=_LIMITS),
    Field("batch_burst", gettext_lazy("burst per batch worker"), "10", kind="int", group=_LIMITS),
    Field("retry_after_s", gettext_lazy("Retry-After on 429 (s)"), "1", kind="int", group=_LIMITS),
    Field(
        "client_max_body_size",
        "`client_max_body_size`",
        "10m",
        group=_SERVER,
        help=gettext_lazy("Long prompts and images; nginx's default 1m refuses them with 413."),
    ),
)

PRESETS: dict[str, dict[str, str]] = {
    "balanced": {},
    "low_latency": {
        "proxy_read_timeout": "90s",
        "longest_generation_s": "60",
        "client_read_timeout_s": "120",
        "rate_per_ip": "20",
        "burst_per_ip": "10",
        "connections_per_ip": "5",
    },
    "high_throughput": {
        "proxy_read_timeout": "330s",
        "longest_generation_s": "300",
        "client_read_timeout_s": "360",
        "rate_per_ip": "100",
        "burst_per_ip": "100",
        "rate_per_key": "50",
        "burst_per_key": "50",
        "connections_per_ip": "64",
        "keepalive": "256",
        "batch_rate": "20",
        "batch_burst": "40",
    },
}
PRESET_LABELS = {
    "balanced": gettext_lazy("Balanced: the guide's gateway (3.2), corrected"),
    "low_latency": gettext_lazy("Low latency: short generations, tight limits"),
    "high_throughput": gettext_lazy("High throughput: long generations, generous limits"),
}

ERRORS = {
    429: ("rate_limit_error", "rate_limit_exceeded", "Rate limit exceeded. Please retry after a short wait."),
    500: ("server_error", "internal_error", "The model service failed. Please retry."),
    502: ("server_error", "upstream_unavailable", "The model service is unavailable. Please retry."),
    503: (
        "server_error",
        "upstream_unavailable",
        "The model service is overloaded or restarting. Please retry.",
    ),
    504: ("server_error", "upstream_timeout", "The model service did not answer in time."),
}


@dataclass(frozen=True, kw_only=True)
class GatewaySpec:
    server_name: str
    listen_port: int
    tls: bool
    tls_certificate: str
    tls_certificate_key: str
    upstream_name: str
    upstream_servers: tuple[str, ...]
    balancing: str
    keepalive: int
    max_fails: int
    fail_timeout: int
    timeouts: dict[str, int]  # directive -> seconds
    longest_generation_s: float
    client_read_timeout_s: float
    rate_per_ip: int
    burst_per_ip: int
    rate_per_key: int
    burst_per_key: int
    nodelay: bool
    anonymous_key: str
    connections_per_ip: int
    batch_cidrs: tuple[str, ...]
    batch_rate: int
    batch_burst: int
    retry_after_s: int
    client_max_body_size: int


TIMEOUTS = (
    "client_header_timeout",
    "client_body_timeout",
    "proxy_connect_timeout",
    "proxy_send_timeout",
    "proxy_read_timeout",
)


def build(values: Mapping[str, str]) -> GatewaySpec:
    servers = tuple(safety.host_port("upstream_servers", s) for s in lines(values["upstream_servers"]))
    if not servers:
        raise safety.UnsafeValue("upstream_servers: " + _("at least one host:port"))
    count = lambda name, low=0, high=100_000: safety.integer(name, values[name], minimum=low, maximum=high)  # noqa: E731
    return GatewaySpec(
        server_name=safety.host("server_name", values["server_name"]),
        listen_port=safety.port_number("listen_port", values["listen_port"]),
        tls=flag(values["tls"]),
        tls_certificate=safety.path("tls_certificate", values["tls_certificate"]),
        tls_certificate_key=safety.path("tls_certificate_key", values["tls_certificate_key"]),
        upstream_name=safety.token("upstream_name", values["upstream_name"]).replace("-", "_"),
        upstream_servers=servers,
        balancing=values["balancing"],
        keepalive=count("keepalive", 0, 10_000),
        max_fails=count("max_fails", 0, 1000),
        fail_timeout=int(safety.seconds("fail_timeout", values["fail_timeout"], minimum=1)),
        timeouts={name: max(int(safety.seconds(name, values[name], minimum=1)), 1) for name in TIMEOUTS},
        longest_generation_s=safety.seconds(
            "longest_generation_s", values["longest_generation_s"], minimum=1
        ),
        client_read_timeout_s=safety.seconds(
            "client_read_timeout_s", values["client_read_timeout_s"], minimum=1
        ),
        rate_per_ip=count("rate_per_ip", 1),
        burst_per_ip=count("burst_per_ip"),
        rate_per_key=count("rate_per_key", 1),
        burst_per_key=count("burst_per_key"),
        nodelay=flag(values["nodelay"]),
        anonymous_key=values["anonymous_key"],
        connections_per_ip=count("connections_per_ip", 1),
        batch_cidrs=tuple(safety.cidr("batch_cidrs", c) for c in lines(values["batch_cidrs"])),
        batch_rate=count("batch_rate", 1),
        batch_burst=count("batch_burst"),
        retry_after_s=count("retry_after_s", 0, 3600),
        client_max_body_size=safety.size_bytes("client_max_body_size", values["client_max_body_size"]),
    )


def _d(directive: str, *args: object, block: list[D] | None = None) -> D:
    result: D = {"directive": directive, "args": [str(a) for a in args]}
    if block is not None:
        result["block"] = block
    return result


def _error_body(status: int) -> str:
    kind, code, message = ERRORS[status]
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}, separators=(",", ":"))


def http_context(spec: GatewaySpec) -> list[D]:
    anonymous = "anonymous" if spec.anonymous_key == "shared" else ""
    payload = [
        _d("limit_req_zone", "$ip_key", "zone=per_ip:10m", f"rate={spec.rate_per_ip}r/s"),
        _d("limit_req_zone", "$api_key", "zone=per_key:10m", f"rate={spec.rate_per_key}r/s"),
        _d("limit_req_zone", "$batch_key", "zone=batch:10m", f"rate={spec.batch_rate}r/s"),
        _d("limit_conn_zone", "$binary_remote_addr", "zone=per_ip_conn:10m"),
        _d("geo", "$batch_client", block=[_d("default", 0), *(_d(c, 1) for c in spec.batch_cidrs)]),
        _d("map", "$batch_client", "$ip_key", block=[_d("1", ""), _d("default", "$binary_remote_addr")]),
        _d("map", "$batch_client", "$batch_key", block=[_d("1", "$binary_remote_addr"), _d("default", "")]),
        _d(
            "map",
            "$http_authorization",
            "$api_key",
            block=[_d("default", anonymous), _d(r"~*^Bearer\s+(.+)$", "$1")],
        ),
        _d("upstream", spec.upstream_name, block=_upstream(spec)),
    ]
    if spec.tls:
        payload.append(
            _d("server", block=[_d("listen", 80), _d("server_name", spec.server_name),
                                _d("return", 301, "https://$host$request_uri")])
        )  # fmt: skip
    payload.append(_d("server", block=_server(spec)))
    return payload


def _upstream(spec: GatewaySpec) -> list[D]:
    block = []
    if spec.balancing == "random":
        block.append(_d("random", "two", "least_conn"))
    elif spec.balancing != "round_robin":
        block.append(_d(spec.balancing))
    block += [
        _d("server", s, f"max_fails={spec.max_fails}", f"fail_timeout={spec.fail_timeout}s")
        for s in spec.upstream_servers
    ]
    if spec.keepalive:
        block += [_d("keepalive", spec.keepalive), _d("keepalive_timeout", "60s")]
    return block


def _server(spec: GatewaySpec) -> list[D]:
    listen = [_d("listen", 443, "ssl")] if spec.tls else [_d("listen", spec.listen_port)]
    tls = (
        [
            _d("ssl_certificate", spec.tls_certificate),
            _d("ssl_certificate_key", spec.tls_certificate_key),
            _d("ssl_protocols", "TLSv1.2", "TLSv1.3"),
        ]
        if spec.tls
        else []
    )
    size = spec.client_max_body_size
    common = [
        _d("server_name", spec.server_name),
        _d("client_max_body_size", f"{size // 1024}k" if size % (1 << 20) else f"{size >> 20}m"),
        *(_d(name, f"{seconds}s") for name, seconds in spec.timeouts.items()),
        # SSE: stream each token as it comes; HTTP/1.1 with the Connection header cleared for keepalive.
        _d("proxy_http_version", "1.1"),
        _d("proxy_buffering", "off"),
        _d("proxy_cache", "off"),
        _d("proxy_set_header", "Host", "$host"),
        _d("proxy_set_header", "X-Real-IP", "$remote_addr"),
        _d("proxy_set_header", "X-Forwarded-For", "$proxy_add_x_forwarded_for"),
        _d("proxy_set_header", "X-Forwarded-Proto", "$scheme"),
        _d("proxy_set_header", "Connection", ""),
        # The engine's own 5xx bodies may carry internal error text: answer with ours.
        _d("proxy_intercept_errors", "on"),
        _d("limit_req_status", 429),
        _d("limit_conn_status", 429),
        *(_d("error_page", status, f"@error_{status}") for status in ERRORS),
    ]
    return [*listen, *tls, *common, *_locations(spec), *_error_locations(spec)]


def _limits(spec: GatewaySpec, *, ip_burst: int) -> list[D]:
    nodelay = ["nodelay"] if spec.nodelay else []
    return [
        _d("limit_req", "zone=per_ip", f"burst={ip_burst}", *nodelay),
        _d("limit_req", "zone=per_key", f"burst={spec.burst_per_key}", *nodelay),
        _d("limit_req", "zone=batch", f"burst={spec.batch_burst}"),  # batch work may wait its turn
        _d("limit_conn", "per_ip_conn", spec.connections_per_ip),
    ]


def _locations(spec: GatewaySpec) -> list[D]:
    upstream = f"http://{spec.upstream_name}"
    generation = [*_limits(spec, ip_burst=spec.burst_per_ip), _d("proxy_pass", upstream)]
    return [
        _d("location", "=", "/v1/chat/completions", block=generation),
        _d("location", "=", "/v1/completions", block=[dict(d) for d in generation]),
        # Embeddings are cheap and come in batches: a larger burst.
        _d(
            "location",
            "=",
            "/v1/embeddings",
            block=[*_limits(spec, ip_burst=spec.burst_per_ip * 5 // 2), _d("proxy_pass", upstream)],
        ),
        _d("location", "=", "/v1/models", block=[_d("proxy_pass", upstream)]),
        _d("location", "=", "/health", block=[_d("access_log", "off"), _d("proxy_pass", upstream)]),
        _d(
            "location",
            "/",
            block=[
                _d("default_type", "application/json"),
                _d(
                    "return",
                    404,
                    json.dumps(
                        {
                            "error": {
                                "message": "Not found.",
                                "type": "invalid_request_error",
                                "code": "not_found",
                            }
                        },
                        separators=(",", ":"),
                    ),
                ),
            ],
        ),
    ]


def _error_locations(spec: GatewaySpec) -> list[D]:
    result = []
    for status in ERRORS:
        block = [_d("default_type", "application/json")]
        if status == 429 and spec.retry_after_s:
            block.append(_d("add_header", "Retry-After", spec.retry_after_s, "always"))
        block.append(_d("return", status, _error_body(status)))
        result.append(_d("location", f"@error_{status}", block=block))
    return result


def render(spec: GatewaySpec) -> list[ConfigFile]:
    header = "# LLM gateway in front of vLLM: generated by LLM Ops Console. Include it in the http block.\n"
    return [ConfigFile("llm-gateway.conf", header + crossplane.build(http_context(spec)) + "\n", "nginx")]


def checks(spec: GatewaySpec) -> list[Check]:
    (file,) = render(spec)
    parsed = nginx_rules.parse_text(file.content)["config"][0]["parsed"]
    context = nginx_rules.Context(
        longest_generation_s=spec.longest_generation_s, client_read_timeout_s=spec.client_read_timeout_s
    )
    found = nginx_rules.check(parsed, context)
    result = [Check(f.severity if f.severity != "info" else "warning", f.title, f.why, f.fix) for f in found]
    read = spec.timeouts["proxy_read_timeout"]
    if not any(f.rule in ("read_timeout_short", "timeout_chain") for f in found):
        result.append(
            Check(
                "ok",
                _("Timeout chain: engine %(engine)ss < gateway %(gateway)ss < client %(client)ss")
                % {
                    "engine": f"{spec.longest_generation_s:g}",
                    "gateway": read,
                    "client": f"{spec.client_read_timeout_s:g}",
                },
            )
        )
    if spec.anonymous_key == "uncounted":
        result.append(
            Check("ok", _("Requests without an API key are limited per IP, not in one shared bucket"))
        )
    return result


GENERATOR = Generator(
    key="nginx",
    label=gettext_noop("nginx gateway"),
    description=gettext_noop(
        "Upstreams with keepalive, layered timeouts, SSE streaming, rate limits per IP, per key and "
        "for batch workers, JSON errors."
    ),
    fields=FIELDS,
    build=build,
    render=render,
    checks=checks,
    presets=PRESETS,
    preset_labels=PRESET_LABELS,
)
