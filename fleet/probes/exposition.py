"""The /metrics page read into samples: only the families and labels the console reads.

A vLLM page is mostly http_*, process_* and histograms the console does not chart, and
prometheus_client's parser (pure Python, a character at a time through every label block)
cost about 1.4 ms of CPU per simulated page: more than a whole scrape by Prometheus. So
`read_samples` reads the page itself, a line at a time: every line must still be
Prometheus text (a sample line of another family is checked for its name; a garbage page
stays garbage), and the lines of the wanted families are read in full (name, the labels
the console reads, value, optional timestamp). `samples_by_prometheus_client` is the old
path, kept for the benchmark and for the test that both read the same samples.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from fleet.probes import metric_names as names

Samples = dict[str, list[tuple[dict[str, str], float]]]

_SUFFIXES = ("_bucket", "_sum", "_count", "_total")
_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


# The histograms a sweep reads: the ones the rules and the charts use. Each costs some 20
# bucket lines of the slow parser per scrape; the others in metric_names are understood
# but left out of the sweep until something uses them. The prefill time explains a TTFT
# (its quantiles with the queue time's); the decode and inference times and the
# per-request TPOT are read as their _sum and _count alone (two lines, a mean per window),
# MEAN_HISTOGRAMS.
SWEPT_HISTOGRAMS = frozenset({"ttft", "itl", "e2e", "queue_time", "prompt_length", "prefill_time"})
MEAN_HISTOGRAMS = frozenset({"decode_time", "inference_time", "request_tpot"})


def _wanted_names() -> tuple[frozenset[str], frozenset[str]]:
    """The sample names the console reads, and the family names their comment lines carry."""
    samples: set[str] = set()
    for mapping in names.GAUGES + names.COUNTERS:
        samples.update(mapping.wire)
    for mapping in (h for h in names.HISTOGRAMS if h.canonical in SWEPT_HISTOGRAMS):
        samples.update(f"{w}{suffix}" for w in mapping.wire for suffix in ("_bucket", "_sum", "_count"))
    for mapping in (h for h in names.HISTOGRAMS if h.canonical in MEAN_HISTOGRAMS):
        samples.update(f"{w}{suffix}" for w in mapping.wire for suffix in ("_sum", "_count"))
    samples.update(wire for wire, _, _ in names.REQUEST_COUNTERS)
    samples.update(wire for wire, _, _ in names.LABELLED_GAUGES + names.LABELLED_COUNTERS)
    samples.update((names.SLEEP_STATE, names.CACHE_CONFIG, names.LORA_INFO))
    families = set(samples)
    for name in samples:
        families.update(name.removesuffix(suffix) for suffix in _SUFFIXES if name.endswith(suffix))
    return frozenset(samples), frozenset(families)


WANTED_SAMPLES, WANTED_FAMILIES = _wanted_names()


# The labels the console reads: a histogram's bucket bound, and the reason a request ended.
# Every other label (model_name, engine, ...) is summed or maxed away, so it is dropped
# before the parser sees it: the parser reads labels a character at a time, and a
# vLLM page repeats the same long model_name on every line.
READ_LABELS = frozenset({"le", "finished_reason"})
# The families whose own labels carry what is read, and those labels.
FAMILY_LABELS: dict[str, frozenset[str]] = {
    names.WAITING_BY_REASON: READ_LABELS | {"reason"},
    names.SLEEP_STATE: READ_LABELS | {"sleep_state"},
    names.CACHE_CONFIG: READ_LABELS | set(names.CACHE_CONFIG_FIELDS),
    names.LORA_INFO: READ_LABELS | set(names.LORA_LABELS),
    **{wire: READ_LABELS | {label} for wire, label, _ in names.LABELLED_COUNTERS},
}
# A series with a `pid` label is one process's copy of a gauge (prometheus_client's
# multiprocess "all" mode): it keeps its pid and engine, so that the copies of one engine's
# value can be told apart from other engines' values and the largest taken. Without a pid
# both are dropped like any other label.
PROCESS_LABELS = ("pid", "engine")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


# One label pair of a block and what follows it (a comma, or the block's closing brace),
# matched from a position: each part can match only one way, so a scan is linear in the
# line whatever the bytes (prometheus_client's parse_labels loops forever on some
# malformed blocks, such as one cut at a brace inside a later quoted value).
_LABEL_PAIR_RE = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(,|\})')
_BLOCK_END_RE = re.compile(r"[ \t]*\}")
_UNESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_UNESCAPE_RE = re.compile(r'\\[\\n"]')


Labels = tuple[tuple[str, str], ...]  # the kept labels of one sample, sorted by name


def _kept(pairs: Iterable[tuple[str, str]], keep: frozenset[str]) -> Labels:
    """The pairs in `keep`, and the process labels when there is a pid, sorted by name."""
    labels = {name: value for name, value in pairs if name in keep or name in PROCESS_LABELS}
    if "pid" not in labels:
        for name in PROCESS_LABELS:
            if name not in keep:
                labels.pop(name, None)
    return tuple(sorted(labels.items()))


def _label_block(line: str, start: int, keep: frozenset[str] = READ_LABELS) -> tuple[Labels, int]:
    """The labels of the block opening at line[start] ("{"), cut down to `keep` (and the
    process labels when it has a pid), and the position after its closing brace;
    ValueError when it is not a well-formed block."""
    pairs: list[tuple[str, str]] = []
    position = start + 1
    closed = _BLOCK_END_RE.match(line, position)
    while closed is None:
        pair = _LABEL_PAIR_RE.match(line, position)
        if pair is None:
            raise ValueError(f"malformed labels: {line[:80]!r}")
        name, value, after = pair.groups()
        if name in keep or name in PROCESS_LABELS:
            pairs.append((name, _UNESCAPE_RE.sub(lambda m: _UNESCAPES[m.group()], value)))
        position = pair.end()
        closed = pair if after == "}" else _BLOCK_END_RE.match(line, position)
    return _kept(pairs, keep), closed.end()


# A block as engines write it (no escapes, no blanks): checked whole by one regex and split
# by another, both in C, instead of a Python step per pair. Any other block takes the
# general scan above (the same labels either way).
_PLAIN_BLOCK_RE = re.compile(r'\{(?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"(?:,(?=[a-zA-Z_])|,?(?=\})))*\}')
_PLAIN_PAIR_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\\n]*)"')


def _labels_at(line: str, start: int, keep: frozenset[str] = READ_LABELS) -> tuple[Labels, int]:
    """_label_block, by the plain block's two regexes when the block is a plain one."""
    plain = _PLAIN_BLOCK_RE.match(line, start)
    if plain is None:
        return _label_block(line, start, keep)
    return _kept(_PLAIN_PAIR_RE.findall(line, start, plain.end()), keep), plain.end()


def _block_text(labels: Labels) -> str:
    kept = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + kept + "}" if kept else ""


class ExpositionTooLarge(ValueError):
    """More lines than a page of the engines' metrics ever holds."""


class ParseDeadline(TimeoutError):
    """The parse outlived the probe's deadline (checked as it goes: no input can keep a
    worker thread busy after its probe has ended)."""


# Bounds on one page, far above any engine's: vLLM serving one model writes ~1,500 lines,
# a dozen LoRA adapters or api-server processes a few times that.
MAX_LINES = 200_000
MIN_PARSE_S = 0.5
_CHECK_EVERY = 2048  # lines between deadline checks


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise ParseDeadline("the metrics page took longer to parse than the probe's deadline allows")


def relevant_lines(text: str, *, deadline: float | None = None) -> str:
    """The exposition cut down to the families and labels the console reads (and their
    TYPE lines; HELP texts are not read), before the
    (slow, pure Python) parser sees it: a vLLM page is mostly http_*, process_* and
    histograms the console does not chart. A line that is not Prometheus text at all still
    fails here, so a garbage page stays garbage; kept lines are checked by
    prometheus_client's parser. `deadline` (time.monotonic()) is checked as lines go by.
    """
    kept = []
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise ExpositionTooLarge(f"{len(lines)} lines, more than the {MAX_LINES} a metrics page may have")
    for number, line in enumerate(lines):
        if number % _CHECK_EVERY == 0:
            _check_deadline(deadline)
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] == "TYPE" and parts[2] in WANTED_FAMILIES:
                kept.append(line)
            continue
        name, end = _sample_name(line)
        if name not in WANTED_SAMPLES:
            continue
        if line[end] == "{":
            labels, after = _labels_at(line, end, FAMILY_LABELS.get(name, READ_LABELS))
            line = name + _block_text(labels) + line[after:]
        kept.append(line)
    return "\n".join(kept) + "\n"


def _sample_name(line: str) -> tuple[str, int]:
    """A sample line's metric name and where it ends (at its label block or its value);
    ValueError when the line does not start as a sample line does."""
    match = _NAME_RE.match(line)
    end = match.end() if match else 0
    if match is None or end == len(line) or line[end] not in "{ \t":
        raise ValueError(f"not a Prometheus sample line: {line[:80]!r}")
    return match.group(), end


def samples_by_prometheus_client(text: str, deadline: float | None = None) -> Samples:
    """The wanted samples through prometheus_client's parser (the relevant lines only): the
    reading `read_samples` replaced, kept to compare against."""
    found: Samples = defaultdict(list)
    for family in text_string_to_metric_families(relevant_lines(text, deadline=deadline)):
        _check_deadline(deadline)
        for sample in family.samples:
            if math.isfinite(sample.value):  # NaN is no reading; JSON stores neither NaN nor Inf
                found[sample.name].append((dict(sample.labels), float(sample.value)))
    return found


def _value(line: str, after: int) -> float:
    """The value after the name and labels, and an optional integer timestamp (ms), as the
    text format writes them; ValueError for anything else."""
    rest = line[after:]
    parts = rest.split()
    if not rest[:1].isspace() or not 1 <= len(parts) <= 2:
        raise ValueError(f"not a sample value: {line[:120]!r}")
    try:
        value = float(parts[0])
        if len(parts) == 2:
            int(parts[1])
    except ValueError:
        raise ValueError(f"not a sample value: {line[:120]!r}") from None
    if "_" in parts[0]:  # Python's float() reads "1_0"; the text format does not
        raise ValueError(f"not a sample value: {line[:120]!r}")
    return value


# A sample line as engines write it: name, an optional plain label block, a value and an
# optional timestamp, matched in one step. A line it does not match is read by the
# general steps (an escaped label value, blanks inside the block) or is not Prometheus text.
_PLAIN_LINE_RE = re.compile(
    f"({_NAME_RE.pattern})({_PLAIN_BLOCK_RE.pattern})?" + r"[ \t]+([^ \t_]+)(?:[ \t]+-?[0-9]+)?[ \t]*"
)


def _general_line(line: str) -> tuple[str, Labels | None, float]:
    """The name, the kept labels (None when the line is none of the wanted families' or
    blank) and the value of a line the quick steps do not read; ValueError when it is not
    a sample line."""
    if line.isspace():
        return "", None, 0.0
    name, end = _sample_name(line)
    if name not in WANTED_SAMPLES:
        return name, None, 0.0
    labels: Labels = ()
    if line[end] == "{":
        labels, end = _labels_at(line, end, FAMILY_LABELS.get(name, READ_LABELS))
    return name, labels, _value(line, end)


# Where each label read from most lines starts in a plain block: a plain value holds no
# quote, so a mark found is the label itself, never text inside another label's value.
_READ_MARKS = tuple((label, (f'{{{label}="', f',{label}="')) for label in sorted(READ_LABELS))


def _plain_labels(name: str, block: str | None) -> dict[str, str]:
    """The kept labels of a plain block (see _PLAIN_LINE_RE)."""
    if not block:
        return {}
    keep = FAMILY_LABELS.get(name)
    if keep is not None or 'pid="' in block:  # labels of their own, or a process's copy
        return dict(_kept(_PLAIN_PAIR_RE.findall(block), keep or READ_LABELS))
    labels = {}
    for label, marks in _READ_MARKS:
        for mark in marks:
            at = block.find(mark)
            if at != -1:
                at += len(mark)
                labels[label] = block[at : block.index('"', at)]
                break
    return labels


def read_samples(text: str, *, deadline: float | None = None) -> Samples:
    """The samples of the wanted families (by sample name: labels cut down to those read,
    NaN and infinities left out); ValueError when a line is not Prometheus text,
    ExpositionTooLarge past MAX_LINES, ParseDeadline when `deadline` (time.monotonic())
    passes first. HELP and TYPE lines are not read: a family is known by its names.

    A line of another family is only checked for its name, as before the parser ever saw
    it; a wanted line is read whole, by one pattern for the plain form engines write."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise ExpositionTooLarge(f"{len(lines)} lines, more than the {MAX_LINES} a metrics page may have")
    found: Samples = defaultdict(list)
    wanted, plain_line, plain_name = WANTED_SAMPLES, _PLAIN_LINE_RE.fullmatch, _NAME_RE.fullmatch
    for first in range(0, len(lines), _CHECK_EVERY):
        _check_deadline(deadline)
        for line in lines[first : first + _CHECK_EVERY]:
            if not line or line[0] == "#":
                continue
            brace, space = line.find("{"), line.find(" ")
            cut = brace if brace != -1 and (space == -1 or brace < space) else space
            name = line[:cut] if cut != -1 else line
            if cut != -1 and name not in wanted and plain_name(name):
                continue  # another family's sample line
            plain = plain_line(line) if name in wanted else None
            if plain is None:
                name, labels, value = _general_line(line)
                if labels is not None and math.isfinite(value):
                    found[name].append((dict(labels), value))
                continue
            value = float(plain[3])  # ValueError when it is no number: the page is garbage
            if math.isfinite(value):  # NaN is no reading; JSON stores neither NaN nor Inf
                found[name].append((_plain_labels(name, plain[2]), value))
    return found
