"""Client config: an OpenAI SDK client (sync and async, connection limits, a fallback model)
and an aiohttp batch client, from one set of timeouts and limits (guide 2.2.5 and 3.3).

The balanced preset is the guide's connect 10 / read 180 / write 30 / pool 10 s with 3
retries; the read timeout is the outer end of the chain engine budget < gateway
proxy_read_timeout < client read timeout (corrections #9). The guide's scripts lost their
spaces (corrections #14), so the files are written here from scratch: fixed code under a block
of settings, each setting the repr() of a checked value; no value is pasted into code any
other way. The API key is read at run time from the environment variable the spec names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, pgettext, pgettext_lazy

from diagnostics.configgen import client_templates, safety
from diagnostics.configgen.base import Check, ConfigFile, Field, Generator

# Per-sequence decode speed of a mid-size model under batch load: for rough estimates only.
ASSUMED_TOKENS_PER_S = 40.0
MAX_SENSIBLE_RETRIES = 10


@dataclass(frozen=True, kw_only=True)
class ClientSpec:
    base_url: str
    api_key_env: str
    model: str
    fallback_model: str  # "": no fallback
    fallback_base_url: str  # "": the fallback model on base_url
    connect_timeout_s: float
    read_timeout_s: float
    write_timeout_s: float
    pool_timeout_s: float
    max_retries: int
    max_connections: int
    max_keepalive: int
    batch_concurrency: int
    batch_requests_per_s: float
    max_tokens: int

    @property
    def longest_answer_s(self) -> float:
        """About how long an answer of max_tokens tokens takes to generate."""
        return self.max_tokens / ASSUMED_TOKENS_PER_S


_ENDPOINT, _TIMEOUTS = pgettext_lazy("config generator", "Endpoint"), gettext_lazy("Timeouts and retries")
_POOL, _BATCH = pgettext_lazy("config generator", "Connection pool"), gettext_lazy("Batch client")
FIELDS = (
    Field(
        "base_url",
        pgettext_lazy("config generator", "Base URL"),
        "http://127.0.0.1:8000/v1",
        gettext_lazy("The OpenAI-compatible API, with /v1."),
        group=_ENDPOINT,
    ),
    Field(
        "api_key_env",
        gettext_lazy("API key variable"),
        "OPENAI_API_KEY",
        gettext_lazy("Read at run time; never written into the files."),
        group=_ENDPOINT,
    ),
    Field(
        "model",
        pgettext_lazy("config generator", "Model"),
        "meta-llama/Llama-3.1-8B-Instruct",
        gettext_lazy("The served model name."),
        group=_ENDPOINT,
    ),
    Field(
        "fallback_model",
        gettext_lazy("Fallback model"),
        "",
        gettext_lazy("Tried once when the model's server fails after its retries; blank: no fallback."),
        group=_ENDPOINT,
    ),
    Field(
        "fallback_base_url",
        gettext_lazy("Fallback base URL"),
        "",
        gettext_lazy("Where the fallback model runs; blank: the base URL."),
        group=_ENDPOINT,
    ),
    Field("connect_timeout_s", gettext_lazy("Connect timeout (s)"), "10", kind="float", group=_TIMEOUTS),
    Field(
        "read_timeout_s",
        gettext_lazy("Read timeout (s)"),
        "180",
        gettext_lazy("Above the gateway's proxy_read_timeout."),
        kind="float",
        group=_TIMEOUTS,
    ),
    Field("write_timeout_s", gettext_lazy("Write timeout (s)"), "30", kind="float", group=_TIMEOUTS),
    Field(
        "pool_timeout_s",
        gettext_lazy("Pool timeout (s)"),
        "10",
        gettext_lazy("Waiting for a free connection."),
        kind="float",
        group=_TIMEOUTS,
    ),
    Field(
        "max_retries",
        pgettext_lazy("config generator", "Retries"),
        "3",
        gettext_lazy("On connection errors, timeouts, 429 and 5xx."),
        kind="int",
        group=_TIMEOUTS,
    ),
    Field(
        "max_connections",
        pgettext_lazy("config generator", "Max connections"),
        "100",
        kind="int",
        group=_POOL,
    ),
    Field("max_keepalive", gettext_lazy("Max keep-alive connections"), "20", kind="int", group=_POOL),
    Field("batch_concurrency", gettext_lazy("Concurrent requests"), "8", kind="int", group=_BATCH),
    Field(
        "batch_requests_per_s",
        pgettext_lazy("config generator", "Requests per second"),
        "5",
        kind="float",
        group=_BATCH,
    ),
    Field(
        "max_tokens",
        "`max_tokens`",
        "512",
        gettext_lazy("The default per request."),
        kind="int",
        group=_BATCH,
    ),
)

PRESETS = {
    "low_latency": {"connect_timeout_s": "3", "read_timeout_s": "30", "write_timeout_s": "10",
                    "pool_timeout_s": "5", "max_retries": "1", "max_tokens": "256"},
    "balanced": {"connect_timeout_s": "10", "read_timeout_s": "180", "write_timeout_s": "30",
                 "pool_timeout_s": "10", "max_retries": "3"},
    "high_throughput": {"max_connections": "400", "max_keepalive": "100", "batch_concurrency": "64",
                        "batch_requests_per_s": "20"},
}  # fmt: skip
PRESET_LABELS = {
    "low_latency": gettext_lazy("Low latency: short read timeout, one retry"),
    "balanced": gettext_lazy("Balanced: the guide's 10 / 180 / 30 / 10 s, 3 retries"),
    "high_throughput": gettext_lazy("High throughput: more connections and batch concurrency"),
}


def _optional(check: Callable[[str, str], str], field: str, value: str) -> str:
    return check(field, value) if value.strip() else ""


def _timeout(values: Mapping[str, str], field: str) -> float:
    # 0 builds, so that checks() can explain what 0 means to each library.
    return float(safety.seconds(field, values[field], minimum=0, maximum=3600))


def build(values: Mapping[str, str]) -> ClientSpec:
    def count(field: str, minimum: int, maximum: int) -> int:
        return safety.integer(field, values[field], minimum=minimum, maximum=maximum)

    return ClientSpec(
        base_url=safety.url("base_url", values["base_url"]),
        api_key_env=safety.env_name("api_key_env", values["api_key_env"]),
        model=safety.token("model", values["model"]),
        fallback_model=_optional(safety.token, "fallback_model", values["fallback_model"]),
        fallback_base_url=_optional(safety.url, "fallback_base_url", values["fallback_base_url"]),
        connect_timeout_s=_timeout(values, "connect_timeout_s"),
        read_timeout_s=_timeout(values, "read_timeout_s"),
        write_timeout_s=_timeout(values, "write_timeout_s"),
        pool_timeout_s=_timeout(values, "pool_timeout_s"),
        max_retries=count("max_retries", 0, 100),
        max_connections=count("max_connections", 1, 100_000),
        max_keepalive=count("max_keepalive", 0, 100_000),
        batch_concurrency=count("batch_concurrency", 1, 10_000),
        batch_requests_per_s=safety.number("batch_requests_per_s", values["batch_requests_per_s"],
                                           minimum=0.01, maximum=100_000),
        max_tokens=count("max_tokens", 1, 1_000_000),
    )  # fmt: skip


# -- render ------------------------------------------------------------------------------

_LLM_SETTINGS = (
    "base_url", "api_key_env", "model", "fallback_model", "fallback_base_url", "connect_timeout_s",
    "read_timeout_s", "write_timeout_s", "pool_timeout_s", "max_retries", "max_connections", "max_keepalive",
    "max_tokens",
)  # fmt: skip
_BATCH_SETTINGS = (
    "base_url", "api_key_env", "model", "connect_timeout_s", "read_timeout_s", "write_timeout_s",
    "pool_timeout_s", "max_retries", "batch_concurrency", "batch_requests_per_s", "max_tokens",
)  # fmt: skip


def settings_block(spec: ClientSpec, names: tuple[str, ...]) -> str:
    """NAME = repr(value) lines: the only place values enter the generated code."""
    lines = ["# Settings, generated by the ops console from checked values."]
    for name in names:
        value = getattr(spec, name)
        if type(value) not in (str, int, float):  # repr() of anything else is no literal
            raise TypeError(f"{name}: {type(value).__name__} cannot be written as a setting")
        lines.append(f"{name.upper()} = {value!r}")
    return "\n".join(lines) + "\n"


def render(spec: ClientSpec) -> list[ConfigFile]:
    return [
        ConfigFile(
            "llm_client.py",
            client_templates.LLM_HEAD + settings_block(spec, _LLM_SETTINGS) + client_templates.LLM_BODY,
            "python",
        ),
        ConfigFile(
            "batch_client.py",
            client_templates.BATCH_HEAD + settings_block(spec, _BATCH_SETTINGS) + client_templates.BATCH_BODY,
            "python",
        ),
    ]


# -- checks ------------------------------------------------------------------------------


def checks(spec: ClientSpec) -> list[Check]:
    found = [
        _zero_timeouts(spec),
        _too_many_retries(spec),
        _connect_not_below_read(spec),
        _read_below_longest_answer(spec),
        _concurrency_wasted(spec),
        _keepalive_above_connections(spec),
        _fallback_without_model(spec),
        _fallback_same_as_primary(spec),
    ]
    return [c for c in found if c is not None] + _confirmations(spec)


def _zero_timeouts(spec: ClientSpec) -> Check | None:
    zero = [n for n in ("connect", "read", "write", "pool") if getattr(spec, f"{n}_timeout_s") <= 0]
    if not zero:
        return None
    names = {
        "connect": pgettext("config generator", "connect"),
        "read": pgettext("config generator", "read"),
        "write": pgettext("config generator", "write"),
        "pool": pgettext("config generator", "pool"),
    }
    return Check(
        "error",
        _("%(timeouts)s timeout is 0")
        % {"timeouts": pgettext("list separator", ", ").join(names[n] for n in zero)},
        why=_(
            "httpx (the SDK) treats 0 as no time at all and fails every request; aiohttp treats it as "
            "no limit and can wait forever. Neither is what a 0 was meant to say."
        ),
        fix=_("Use the guide's 10 / 180 / 30 / 10 s, or shorter, but above 0."),
    )


def _too_many_retries(spec: ClientSpec) -> Check | None:
    if spec.max_retries <= MAX_SENSIBLE_RETRIES:
        return None
    return Check(
        "error",
        _("%(retries)s retries") % {"retries": spec.max_retries},
        why=_(
            "Each retry is another full request to a server that is already failing or throttling: many "
            "clients doing %(retries)s retries turn an overload into a retry storm, and one call can "
            "hang for up to %(attempts)s x the read timeout."
        )
        % {"retries": spec.max_retries, "attempts": spec.max_retries + 1},
        fix=_("3 (the guide), at most %(most)s; let the fallback model take over instead.")
        % {"most": MAX_SENSIBLE_RETRIES},
    )


def _connect_not_below_read(spec: ClientSpec) -> Check | None:
    if spec.connect_timeout_s < spec.read_timeout_s or spec.read_timeout_s <= 0:
        return None
    return Check(
        "warning",
        _("Connect timeout %(connect)s s is not below read timeout %(read)s s")
        % {"connect": f"{spec.connect_timeout_s:g}", "read": f"{spec.read_timeout_s:g}"},
        why=_(
            "A connection is set up in milliseconds; the read timeout has to cover the prefill and, without "
            "streaming, the whole answer. Equal or reversed values usually mean the two were swapped."
        ),
        fix=_("Connect 3-10 s, read well above the longest expected answer."),
    )


def _read_below_longest_answer(spec: ClientSpec) -> Check | None:
    longest = spec.longest_answer_s
    if spec.read_timeout_s <= 0 or spec.read_timeout_s >= longest:
        return None
    return Check(
        "warning",
        _("Read timeout %(read)s s is shorter than a %(tokens)s-token answer (~%(longest)s s)")
        % {"read": f"{spec.read_timeout_s:g}", "tokens": spec.max_tokens, "longest": f"{longest:.0f}"},
        why=_(
            "At about %(speed)s tokens/s a full answer takes ~%(longest)s s. A non-streamed request waits "
            "for all of it, times out, and the retry starts the generation again."
        )
        % {"speed": f"{ASSUMED_TOKENS_PER_S:g}", "longest": f"{longest:.0f}"},
        fix=_("Raise the read timeout, lower max_tokens, or stream."),
    )


def _concurrency_wasted(spec: ClientSpec) -> Check | None:
    # Little's law: requests in flight = arrival rate x time each one takes.
    in_flight = spec.batch_requests_per_s * spec.longest_answer_s
    if in_flight >= spec.batch_concurrency / 2:
        return None
    return Check(
        "warning",
        _("The rate limit leaves most of the %(slots)s batch slots idle") % {"slots": spec.batch_concurrency},
        why=_(
            "At %(rate)s requests/s, with answers of at most ~%(longest)s s, about %(in_flight)s requests "
            "are ever in flight (rate x latency), so the concurrency limit is never reached: the rate limit "
            "alone sets the pace."
        )
        % {
            "rate": f"{spec.batch_requests_per_s:g}",
            "longest": f"{spec.longest_answer_s:.0f}",
            "in_flight": f"{in_flight:.1f}",
        },
        fix=_("Raise the rate to about %(rate)s/s or lower the concurrency to %(concurrency)s.")
        % {
            "rate": f"{spec.batch_concurrency / max(spec.longest_answer_s, 0.001):.1f}",
            "concurrency": max(1, round(in_flight)),
        },
    )


def _keepalive_above_connections(spec: ClientSpec) -> Check | None:
    if spec.max_keepalive <= spec.max_connections:
        return None
    return Check(
        "warning",
        _("More keep-alive connections than connections"),
        why=_("httpx never holds more than max_connections; the extra keep-alive allowance is never used."),
        fix=_("Keep-alive at most %(count)s.") % {"count": spec.max_connections},
    )


def _fallback_without_model(spec: ClientSpec) -> Check | None:
    if not spec.fallback_base_url or spec.fallback_model:
        return None
    return Check(
        "warning",
        _("Fallback base URL without a fallback model: no fallback"),
        why=_(
            "The fallback is a model; without one the client raises after its retries and the URL is unused."
        ),
        fix=_("Name the fallback model (it may be the same model served at the second URL)."),
    )


def _fallback_same_as_primary(spec: ClientSpec) -> Check | None:
    same_place = not spec.fallback_base_url or spec.fallback_base_url == spec.base_url
    if spec.fallback_model != spec.model or not same_place:
        return None
    return Check(
        "warning",
        _("The fallback is the primary model on the same server"),
        why=_("It fails the same way at the same moment: the fallback only adds one more attempt."),
        fix=_("Use a second model, or the same model behind a second base URL."),
    )


def _confirmations(spec: ClientSpec) -> list[Check]:
    return [
        Check(
            "ok",
            _("Client read timeout %(read)s s is the outer end of the timeout chain")
            % {"read": f"{spec.read_timeout_s:g}"},
            why=_(
                "Engine budget (max_tokens) < gateway proxy_read_timeout < client read timeout (the guide's "
                "120 / 150 / 180 s, corrections #9): the gateway gives up first and answers 504, and the "
                "client sees why."
            ),
            fix=_("Set the gateway's proxy_read_timeout below %(read)s s.")
            % {"read": f"{spec.read_timeout_s:g}"},
        ),
        Check(
            "ok",
            _("The API key is read from %(variable)s at run time") % {"variable": f"${spec.api_key_env}"},
            why=_(
                "Neither file holds a key; without the variable they send EMPTY, which vLLM without "
                "--api-key accepts."
            ),
        ),
    ]


# -- the generated files -----------------------------------------------------------------
# Fixed text: never formatted, so nothing but the settings block varies.

GENERATOR = Generator(
    key="client",
    label=gettext_noop("Client config"),
    description=gettext_noop(
        "An OpenAI SDK client (sync and async, connection limits, fallback model) and an aiohttp "
        "batch client with a concurrency limit, a rate limit and Retry-After-aware retries."
    ),
    fields=FIELDS,
    build=build,
    render=render,
    checks=checks,
    presets=PRESETS,
    preset_labels=PRESET_LABELS,
)
