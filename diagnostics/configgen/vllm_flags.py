"""Which `vllm serve` flags exist in which vLLM version (docs/guide-corrections.md, appendix A.3).

A generated command must hold only flags its version accepts: renamed flags follow the
version, removed ones are dropped with a note, and flags the guide invents
(`--request-timeout`, `--enable-metrics`, `--max-paddings`) are never emitted.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

Version = tuple[int, int]

SUPPORTED_VERSIONS: tuple[str, ...] = (
    "0.7",
    "0.8",
    "0.9",
    "0.10",
    "0.11",
    "0.12",
    "0.14",
    "0.16",
    "0.18",
    "0.20",
    "0.22",
    "0.24",
    "0.26",
    "0.28",
    "0.30",
    "0.32",
)
DEFAULT_VERSION = "0.11"


def parse(version: str) -> Version:
    major, minor = version.strip().lstrip("v").split(".")[:2]
    return int(major), int(minor)


@dataclass(frozen=True)
class Flag:
    name: str
    since: Version = (0, 0)
    until: Version | None = None  # first version without it
    note: str = ""  # English (gettext_noop): the files carry it as it is, the page translates it

    def exists_in(self, version: Version) -> bool:
        return self.since <= version and (self.until is None or version < self.until)


FLAGS: dict[str, Flag] = {
    flag.name: flag
    for flag in (
        Flag("--served-model-name"),
        Flag("--host"),
        Flag("--port"),
        Flag("--dtype"),
        Flag("--quantization"),
        Flag("--max-model-len"),
        Flag("--gpu-memory-utilization"),
        Flag("--tensor-parallel-size"),
        Flag("--pipeline-parallel-size"),
        Flag("--max-num-seqs"),
        Flag("--max-num-batched-tokens"),
        Flag("--kv-cache-dtype"),
        Flag("--block-size"),
        Flag("--enable-chunked-prefill"),
        Flag("--enable-prefix-caching"),
        Flag(
            "--no-enable-prefix-caching",
            since=(0, 9),
            note=gettext_noop("V1 turns prefix caching on by default"),
        ),
        Flag("--trust-remote-code"),
        Flag("--enforce-eager"),
        Flag("--disable-log-stats", note=gettext_noop("in V1 it also turns off every vllm:* metric")),
        Flag("--uvicorn-log-level"),
        Flag("--enable-expert-parallel", since=(0, 8)),
        Flag("--kv-cache-memory-bytes", since=(0, 11)),
        Flag("--swap-space", until=(0, 18), note=gettext_noop("no effect in the V1 engine; removed in 0.18")),
        Flag(
            "--disable-log-requests",
            until=(0, 12),
            note=gettext_noop("replaced by --enable-log-requests (default off)"),
        ),
        Flag("--enable-log-requests", since=(0, 10)),
    )
}

# Flags people copy from the guide that no vLLM release accepts, and why.
NOT_FLAGS = {
    "--request-timeout": "not a vLLM flag: a request's time limit belongs to the gateway "
    "(proxy_read_timeout) and the client; the engine's budget is max_tokens",
    "--enable-metrics": "not a `vllm serve` flag: metrics are always on (only run_batch has it)",
    "--max-paddings": "removed long ago (0.2.x)",
}


def emit(version: Version, wanted: list[tuple[str, str | None]]) -> tuple[list[str], list[str]]:
    """The arguments for `wanted` (flag, value or None for a switch) that exist in `version`,
    and a note for each one dropped (English: the generated files carry these notes)."""
    args: list[str] = []
    for name, value in wanted:
        if _flag(name).exists_in(version):
            args.append(name)
            if value is not None:
                args.append(value)
    notes = [
        f"{flag.name} left out: not in vLLM {version[0]}.{version[1]} ({flag.note or 'not there yet'})"
        for flag in left_out(version, wanted)
    ]
    return args, notes


def left_out(version: Version, wanted: list[tuple[str, str | None]]) -> list[Flag]:
    """The wanted flags `version` does not have."""
    return [_flag(name) for name, _value in wanted if not _flag(name).exists_in(version)]


def notes_shown(version: Version, wanted: list[tuple[str, str | None]]) -> list[str]:
    """emit's notes in the reader's language, for the page (never for the files)."""
    return [
        _("%(flag)s left out: not in vLLM %(version)s (%(why)s)")
        % {
            "flag": flag.name,
            "version": f"{version[0]}.{version[1]}",
            "why": _(flag.note) if flag.note else _("not there yet"),
        }
        for flag in left_out(version, wanted)
    ]


def _flag(name: str) -> Flag:
    flag = FLAGS.get(name)
    if flag is None:
        raise KeyError(f"{name} is not in the flag table")
    return flag
