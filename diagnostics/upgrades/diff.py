"""Before a vLLM version bump: what breaks, what changes, and the configs for the new version.

`diff(old, new, instance=..., fleet=...)` answers four questions for one launch or a whole
fleet, from the version facts in data/vllm_changes.yaml (facts.py) and the configs the console
generates (artifacts.py):

(a) metrics: which `vllm:*` names the console's own probes (fleet/probes/metric_names.py), the
    generated Prometheus alert rules and the generated Grafana dashboard read on the old version
    that the new one renames, hides or drops;
(b) flags: which launch flags of the launch change meaning, become deprecated or are rejected,
    and how the generated `vllm serve` command changes;
(c) defaults: which defaults change, and what the calculator (diagnostics/sizing) makes of the
    launch under both versions: KV blocks and tokens, concurrency;
(d) the regenerated launch command, alert rules and dashboard for the new version.

Plain Python: the Django edge (service.py) turns inventory instances into Targets.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from core.i18n import Message, later
from diagnostics.configgen import vllm_flags
from diagnostics.configgen.base import ConfigFile
from diagnostics.sizing import calculator
from diagnostics.sizing import versions as sizing_versions
from diagnostics.sizing.figures import gib
from diagnostics.upgrades import artifacts, facts, texts
from diagnostics.upgrades.facts import Change, Exposure, MetricFact, Table, Version, VersionError, label
from fleet.hostchecks.launch_flags import parse_launch_flags
from fleet.probes import metric_names

BAD, WARNING, INFO, OK = "bad", "warning", "info", "ok"
SEVERITY_ORDER = {BAD: 0, WARNING: 1, INFO: 2, OK: 3}
CONSOLE, ALERTS, DASHBOARD, REGENERATED = "console", "alerts", "dashboard", "regenerated"

# vLLM's API-server defaults on GPUs of 70 GiB or more before 0.9.0, A100 80 GB included
# (vllm#16158, vllm#17073; vllm#17885 put A100 back on 256 / 2048 in 0.9.0).
_OLD_BIG_GPU_SEQS, _OLD_BIG_GPU_BATCHED = 1024, 8192


@dataclass(frozen=True)
class Target:
    """One launch to compare: an inventory instance, as plain values."""

    name: str
    launch_values: Mapping[str, str] = field(default_factory=dict)  # the launch generators' fields
    extra_args: str = ""  # other flags, as typed on the command line
    sizing: calculator.SizingSpec | None = None
    sizing_problems: tuple[Message, ...] = ()  # why it cannot be sized, when sizing is None


@dataclass(frozen=True)
class MetricFinding:
    source: str  # console, alerts, dashboard, regenerated
    user: str  # the console's key, the alert or the panel that reads it
    metric: str  # the name read on the old version (regenerated: on the new one)
    status: str  # gone, deprecated, follows, lost, gained, broken_before, mismatch, unknown
    severity: str
    message: Message
    advice: tuple[Message, ...] = ()
    replacement: str = ""
    escape_hatch: str = ""
    fact: MetricFact | None = None

    @property
    def about(self) -> Message | None:
        return texts.text(self.fact.id) if self.fact else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "user": self.user,
            "metric": self.metric,
            "status": self.status,
            "severity": self.severity,
            "message": str(self.message),
            "advice": [str(a) for a in self.advice],
            "replacement": self.replacement,
            "escape_hatch": self.escape_hatch,
            "about": str(self.about) if self.about else "",
            "fact": _fact_dict(self.fact),
        }


@dataclass(frozen=True)
class FlagFinding:
    change: Change
    severity: str
    message: Message
    used_by: tuple[str, ...] = ()  # the targets whose launch has the flag
    origin: str = "table"  # table: data/vllm_changes.yaml; generator: the console's flag table

    def to_dict(self) -> dict[str, Any]:
        return {
            "flag": self.change.subject,
            "change": self.change.kind,
            "version": self.change.version_label,
            "replacement": self.change.replacement,
            "severity": self.severity,
            "message": str(self.message),
            "used_by": list(self.used_by),
            "origin": self.origin,
            "fact": _fact_dict(self.change),
        }


@dataclass(frozen=True)
class CommandChange:
    """How the generated `vllm serve` command of one target changes."""

    target: str
    old_args: tuple[str, ...]
    new_args: tuple[str, ...]
    dropped: tuple[str, ...]
    added: tuple[str, ...]
    changed: tuple[tuple[str, str, str], ...]  # (flag, old value, new value)
    error: Message | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "old_args": list(self.old_args),
            "new_args": list(self.new_args),
            "dropped": list(self.dropped),
            "added": list(self.added),
            "changed": [list(c) for c in self.changed],
            "error": str(self.error) if self.error else None,
        }


@dataclass(frozen=True)
class DefaultFinding:
    change: Change
    message: Message
    applies: tuple[Message, ...] = ()  # what it means for the targets

    def to_dict(self) -> dict[str, Any]:
        return {
            "setting": self.change.subject,
            "version": self.change.version_label,
            "before": self.change.before,
            "after": self.change.after,
            "sizing": self.change.sizing,
            "message": str(self.message),
            "applies": [str(a) for a in self.applies],
            "fact": _fact_dict(self.change),
        }


@dataclass(frozen=True)
class SizingCase:
    title: Message
    modelled: str = ""  # the calculator's version, "" when not sized
    sizing: calculator.Sizing | None = None
    problem: Message | str | None = None

    def summary(self) -> dict[str, Any] | None:
        s = self.sizing
        if s is None:
            return None
        graphs = next((f.value for f in s.figures if f.key == "cuda_graphs"), 0.0)
        return {
            "kv_cache_blocks": s.capacity.num_blocks,
            "kv_cache_tokens": s.capacity.tokens,
            "max_concurrency": round(s.capacity.max_concurrency, 2),
            "concurrency_at_average": round(s.concurrency_at_average, 2),
            "running_at_average": int(min(s.concurrency_at_average, s.resolved.max_num_seqs)),
            "max_num_seqs": s.resolved.max_num_seqs,
            "max_num_batched_tokens": s.resolved.max_num_batched_tokens,
            "gpu_memory_utilization": s.resolved.gpu_memory_utilization,
            "available_kv_gib": round(gib(s.available_kv_bytes), 2),
            "cuda_graphs_gib": round(graphs, 2),
            "max_model_len": s.resolved.max_model_len,
            "fits": s.fits,
            "error": s.error.message if s.error else None,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": str(self.title),
            "modelled_as": self.modelled,
            "result": self.summary(),
            "problem": str(self.problem) if self.problem else None,
        }


@dataclass(frozen=True)
class SizingDiff:
    target: str
    cases: tuple[SizingCase, ...] = ()  # before, after, then "a flag left out" variants
    notes: tuple[Message, ...] = ()
    problem: Message | str | None = None  # the target cannot be sized at all

    @property
    def before(self) -> SizingCase | None:
        return self.cases[0] if self.cases else None

    @property
    def after(self) -> SizingCase | None:
        return self.cases[1] if len(self.cases) > 1 else None

    def delta(self, key: str) -> float | None:
        """after - before of a summary figure, when both were sized."""
        before = self.before.summary() if self.before else None
        after = self.after.summary() if self.after else None
        if not before or not after:
            return None
        return after[key] - before[key]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "cases": [c.to_dict() for c in self.cases],
            "notes": [str(n) for n in self.notes],
            "problem": str(self.problem) if self.problem else None,
            "delta_kv_cache_tokens": self.delta("kv_cache_tokens"),
            "delta_max_concurrency": self.delta("max_concurrency"),
        }


@dataclass(frozen=True)
class Report:
    old: Version
    new: Version
    scope: str  # instance or fleet
    targets: tuple[str, ...]
    metrics: tuple[MetricFinding, ...]
    flags: tuple[FlagFinding, ...]
    commands: tuple[CommandChange, ...]
    defaults: tuple[DefaultFinding, ...]
    sizing: tuple[SizingDiff, ...]
    files: tuple[ConfigFile, ...]  # the regenerated configs for the new version
    errors: tuple[Message, ...] = ()
    choices: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # generator: (old, new) choice

    @property
    def old_label(self) -> str:
        return label(self.old)

    @property
    def new_label(self) -> str:
        return label(self.new)

    def file(self, name: str) -> ConfigFile | None:
        return next((f for f in self.files if f.name == name), None)

    def counts(self) -> dict[str, int]:
        found = [*self.metrics, *self.flags]
        return {level: sum(1 for f in found if f.severity == level) for level in (BAD, WARNING, INFO)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": self.old_label,
            "to": self.new_label,
            "scope": self.scope,
            "targets": list(self.targets),
            "counts": self.counts(),
            "generator_versions": {key: {"from": old, "to": new} for key, (old, new) in self.choices.items()},
            "metrics": [m.to_dict() for m in self.metrics],
            "flags": [f.to_dict() for f in self.flags],
            "commands": [c.to_dict() for c in self.commands],
            "defaults": [d.to_dict() for d in self.defaults],
            "sizing": [s.to_dict() for s in self.sizing],
            "files": [{"name": f.name, "language": f.language, "content": f.content} for f in self.files],
            "errors": [str(e) for e in self.errors],
        }


def _fact_dict(fact: MetricFact | Change | None) -> dict[str, Any] | None:
    if fact is None:
        return None
    return {"id": fact.id, "certainty": fact.certainty, "sources": list(fact.sources), "note": fact.note}


# -- the diff ------------------------------------------------------------------------------------


def versions(old_text: str, new_text: str) -> tuple[Version, Version]:
    """Both versions, checked: known to the table, the new one newer."""
    old, new = facts.checked_version(old_text), facts.checked_version(new_text)
    if new <= old:
        raise VersionError(
            later(
                "The new version %(new)s must be newer than the old one %(old)s",
                new=label(new),
                old=label(old),
            )
        )
    return old, new


def diff(
    old_text: str,
    new_text: str,
    *,
    instance: Target | None = None,
    fleet: Sequence[Target] = (),
    table: Table | None = None,
) -> Report:
    """The upgrade report for one instance, or for every target of the fleet when no instance is
    given. VersionError for text that is no version, or versions in the wrong order."""
    table = table or facts.table()
    old, new = versions(old_text, new_text)
    targets = [instance] if instance is not None else list(fleet)
    old_alerts, new_alerts = artifacts.alert_rules(old), artifacts.alert_rules(new)
    old_board, new_board = artifacts.dashboard(old), artifacts.dashboard(new)
    launches = [
        (t, artifacts.launch_command(old, t.launch_values), artifacts.launch_command(new, t.launch_values))
        for t in (targets or [Target("")])
    ]

    metrics = [
        *console_findings(table, old, new),
        *config_findings(table, ALERTS, artifacts.alert_usages(old_alerts), old, new),
        *config_findings(table, DASHBOARD, artifacts.dashboard_usages(old_board), old, new),
        *regenerated_findings(table, new, new_alerts, new_board),
    ]
    used = {t.name: _flags_used(t, old_launch) for t, old_launch, _ in launches if t.name}
    files = [
        *_launch_files([new_launch for _, _, new_launch in launches]),
        *new_alerts.files,
        *new_board.files,
    ]
    errors = [g.error for g in (old_alerts, new_alerts, old_board, new_board) if g.error]
    errors += [g.error for _, o, n in launches for g in (o, n) if g.error]
    first_launch = launches[0]
    return Report(
        old=old,
        new=new,
        scope="instance" if instance is not None else "fleet",
        targets=tuple(t.name for t in targets),
        metrics=tuple(sorted(metrics, key=lambda m: SEVERITY_ORDER[m.severity])),
        flags=tuple(flag_findings(table, old, new, used, [o for _, o, _ in launches])),
        commands=tuple(_command_change(t.name, o, n) for t, o, n in launches if t.name),
        defaults=tuple(default_findings(table, old, new, targets)),
        sizing=tuple(sizing_diff(t, old, new) for t in targets),
        files=tuple(files),
        errors=tuple(errors),
        choices={
            artifacts.LAUNCH_KEY: (first_launch[1].choice, first_launch[2].choice),
            artifacts.ALERTS_KEY: (old_alerts.choice, new_alerts.choice),
            artifacts.DASHBOARD_KEY: (old_board.choice, new_board.choice),
        },
    )


# -- (a) metrics ---------------------------------------------------------------------------------


def _gone_phrase(fact: MetricFact | None, version: Version) -> Message:
    if fact is not None and fact.exposure(version) is Exposure.REMOVED and fact.removed:
        return later("removed in %(version)s", version=label(fact.removed))
    if fact is not None and fact.exposure(version) is Exposure.HIDDEN and fact.hidden:
        return later("hidden from %(version)s", version=label(fact.hidden))
    return later("not exposed")


def _console_groups() -> list[tuple[str, list[str]]]:
    """Each canonical key of the probes and the `vllm:*` wire names it is read from, in order."""
    groups = []
    for names in (metric_names.GAUGES, metric_names.COUNTERS, metric_names.HISTOGRAMS):
        for name in names:
            wires = [w for w in name.wire if w.startswith("vllm:")]
            if wires:
                groups.append((name.canonical, [facts.metric_base(w) for w in wires]))
    for wire, _label, _value in metric_names.REQUEST_COUNTERS:
        if wire.startswith("vllm:"):
            groups.append((metric_names.REQUEST_PREFIX.rstrip(":"), [wire]))
    # Series split by a label, and the info and state gauges read whole (where the probes have them).
    for wire, *_split in (*getattr(metric_names, "LABELLED_GAUGES", ()),
                                 *getattr(metric_names, "LABELLED_COUNTERS", ())):  # fmt: skip
        if wire.startswith("vllm:"):
            groups.append((wire.removeprefix("vllm:").removesuffix("_total"), [facts.metric_base(wire)]))
    for constant in ("SLEEP_STATE", "CACHE_CONFIG", "LORA_INFO"):
        wire = getattr(metric_names, constant, "")
        if wire.startswith("vllm:"):
            groups.append((wire.removeprefix("vllm:"), [wire]))
    return groups


def console_findings(table: Table, old: Version, new: Version) -> list[MetricFinding]:
    """The console's probes read each canonical key from the first wire name a server exposes,
    so a rename is followed by itself; a name with no successor is lost."""
    found = []
    for canonical, wires in _console_groups():
        if all(table.exposure(w, old) is Exposure.UNKNOWN for w in wires):
            found.append(
                MetricFinding(
                    CONSOLE,
                    canonical,
                    wires[0],
                    "unknown",
                    INFO,
                    later(
                        "The version table has no fact about %(metric)s: check what vLLM %(version)s "
                        "exposes on /metrics before relying on %(key)s.",
                        metric=wires[0],
                        version=label(new),
                        key=canonical,
                    ),
                )
            )
            continue
        read_old = next((w for w in wires if table.exposure(w, old).exposed), "")
        read_new = next((w for w in wires if table.exposure(w, new).exposed), "")
        if read_old == read_new:
            continue
        fact = table.metric(read_old) if read_old else table.metric(read_new)
        if read_old and read_new:
            unit = fact is not None and fact.unit_change
            found.append(
                MetricFinding(
                    CONSOLE,
                    canonical,
                    read_old,
                    "follows",
                    INFO if unit else OK,
                    later(
                        "On vLLM %(version)s the console reads %(new_metric)s where it read "
                        "%(old_metric)s: it follows the rename by itself.",
                        version=label(new),
                        new_metric=read_new,
                        old_metric=read_old,
                    ),
                    replacement=read_new,
                    fact=fact,
                )
            )
        elif read_old:
            found.append(
                MetricFinding(
                    CONSOLE,
                    canonical,
                    read_old,
                    "lost",
                    WARNING,
                    later(
                        "vLLM %(version)s no longer exposes %(metric)s (%(state)s), so the console stops "
                        "showing %(key)s.",
                        version=label(new),
                        metric=read_old,
                        state=_gone_phrase(fact, new),
                        key=canonical,
                    ),
                    fact=fact,
                )
            )
        else:
            found.append(
                MetricFinding(
                    CONSOLE,
                    canonical,
                    read_new,
                    "gained",
                    INFO,
                    later(
                        "vLLM %(version)s adds %(metric)s: the console starts showing %(key)s.",
                        version=label(new),
                        metric=read_new,
                        key=canonical,
                    ),
                    fact=fact,
                )
            )
    return found


def _gone_message(source: str, user: str, metric: str, new: Version, state: Message) -> Message:
    if source == ALERTS:
        return later(
            "Alert %(alert)s reads %(metric)s, which vLLM %(version)s no longer exposes (%(state)s): "
            "the alert can never fire.",
            alert=user,
            metric=metric,
            version=label(new),
            state=state,
        )
    return later(
        "Panel %(panel)s reads %(metric)s, which vLLM %(version)s no longer exposes (%(state)s): the "
        "panel goes empty.",
        panel=user,
        metric=metric,
        version=label(new),
        state=state,
    )


def config_findings(
    table: Table, source: str, usages: list[artifacts.Usage], old: Version, new: Version
) -> list[MetricFinding]:
    """What happens to each rule or panel generated for the old version once the new one runs."""
    found = []
    for usage in usages:
        for metric in usage.metrics:
            before, after = table.exposure(metric, old), table.exposure(metric, new)
            fact = table.metric(metric)
            if after is Exposure.UNKNOWN:
                found.append(
                    MetricFinding(
                        source,
                        usage.user,
                        metric,
                        "unknown",
                        INFO,
                        later(
                            "%(user)s reads %(metric)s, about which the version table has no fact.",
                            user=usage.user,
                            metric=metric,
                        ),
                    )
                )
            elif not before.exposed:
                found.append(
                    MetricFinding(
                        source,
                        usage.user,
                        metric,
                        "broken_before",
                        WARNING,
                        later(
                            "%(user)s reads %(metric)s, which vLLM %(version)s does not expose either: "
                            "it is empty before the upgrade too.",
                            user=usage.user,
                            metric=metric,
                            version=label(old),
                        ),
                        fact=fact,
                    )
                )
            elif after in (Exposure.HIDDEN, Exposure.REMOVED):
                advice = []
                if fact is not None and fact.replacement:
                    advice.append(
                        later(
                            "Read %(replacement)s instead: the regenerated file below does.",
                            replacement=fact.replacement,
                        )
                    )
                hatch = fact.escape_hatch(new) if fact is not None else ""
                if hatch:
                    advice.append(
                        later(
                            "Until the new file is deployed, %(flag)s on the command line brings the old "
                            "name back on vLLM %(version)s.",
                            flag=hatch,
                            version=label(new),
                        )
                    )
                found.append(
                    MetricFinding(
                        source,
                        usage.user,
                        metric,
                        "gone",
                        BAD,
                        _gone_message(source, usage.user, metric, new, _gone_phrase(fact, new)),
                        advice=tuple(advice),
                        replacement=fact.replacement if fact else "",
                        escape_hatch=hatch,
                        fact=fact,
                    )
                )
            elif after is Exposure.DEPRECATED and fact is not None:
                found.append(
                    MetricFinding(
                        source,
                        usage.user,
                        metric,
                        "deprecated",
                        WARNING,
                        later(
                            "%(user)s reads %(metric)s, which vLLM %(version)s still exposes but has "
                            "deprecated (hidden from %(hidden)s): switch to %(replacement)s.",
                            user=usage.user,
                            metric=metric,
                            version=label(new),
                            hidden=label(fact.hidden) if fact.hidden else "?",
                            replacement=fact.replacement or "?",
                        ),
                        replacement=fact.replacement,
                        fact=fact,
                    )
                )
    return found


def regenerated_findings(
    table: Table, new: Version, alerts: artifacts.Generated, board: artifacts.Generated
) -> list[MetricFinding]:
    """A regenerated file that reads a name the new version does not expose: the generators
    offer whole minor versions, and a rename inside one (0.9.2) falls between them."""
    found = []
    for generated, usages in (
        (alerts, artifacts.alert_usages(alerts)),
        (board, artifacts.dashboard_usages(board)),
    ):
        for usage in usages:
            for metric in usage.metrics:
                exposure = table.exposure(metric, new)
                if exposure.exposed or exposure is Exposure.UNKNOWN:
                    continue
                found.append(
                    MetricFinding(
                        REGENERATED,
                        usage.user,
                        metric,
                        "mismatch",
                        WARNING,
                        later(
                            "The regenerated %(user)s reads %(metric)s, which vLLM %(version)s does not "
                            "expose (the generator uses its %(choice)s names): check it before deploying.",
                            user=usage.user,
                            metric=metric,
                            version=label(new),
                            choice=generated.choice,
                        ),
                        fact=table.metric(metric),
                    )
                )
    return found


# -- (b) flags -----------------------------------------------------------------------------------


def _flag_names(args: Sequence[str]) -> set[str]:
    return {arg.split("=", 1)[0] for arg in args if arg.startswith("--")}


def _flags_used(target: Target, old_launch: artifacts.Generated) -> set[str]:
    """The flags of a target's launch: its generated command for the old version and the other
    flags the inventory keeps."""
    used = _flag_names(old_launch.args)
    if target.extra_args.strip():
        try:
            words = shlex.split(target.extra_args)
        except ValueError:  # an unbalanced quote: read the words as they stand
            words = target.extra_args.split()
        parsed = parse_launch_flags(["vllm", "serve", "model", *words])
        used |= {f"--{name}" for name in parsed if name not in ("model", "positional")}
    return used


def _flag_severity(change: Change, used: bool) -> str:
    if change.kind == "env":
        return WARNING
    if change.kind == "added" or not used:
        return INFO
    return BAD if change.kind == "removed" else WARNING


def flag_findings(
    table: Table,
    old: Version,
    new: Version,
    used: Mapping[str, set[str]],
    old_launches: Sequence[artifacts.Generated] = (),
) -> list[FlagFinding]:
    """The table's flag changes between the versions, each with the targets it touches; then
    flags the console's own generator drops for the new version that the table does not cover."""
    found = []
    covered = set()
    for change in table.flag_changes(old, new):
        users = tuple(sorted(name for name, flags in used.items() if change.subject in flags))
        covered.add(change.subject)
        message = texts.text(change.id) or Message(change.note or change.id)
        found.append(FlagFinding(change, _flag_severity(change, bool(users)), message, users))
    old_minor, new_minor = old[:2], new[:2]
    for name in sorted({f for flags in used.values() for f in flags} - covered):
        flag = vllm_flags.FLAGS.get(name)
        if flag is None or not flag.exists_in(old_minor) or flag.exists_in(new_minor):
            continue
        until = flag.until or new_minor
        change = Change(id=f"generator:{name}", kind="removed", subject=name, version=(*until, 0),
                        certainty="console flag table", note=flag.note)  # fmt: skip
        users = tuple(sorted(t for t, flags in used.items() if name in flags))
        found.append(
            FlagFinding(
                change,
                BAD,
                later(
                    "The console's launch generator leaves %(flag)s out from vLLM %(version)s.",
                    flag=name,
                    version=change.version_label,
                ),
                users,
                origin="generator",
            )
        )
    return sorted(found, key=lambda f: (SEVERITY_ORDER[f.severity], f.change.version))


def _values(args: Sequence[str]) -> dict[str, str]:
    """Flag -> value ("" for a switch) of a generated argument list."""
    values: dict[str, str] = {}
    i = 0
    while i < len(args):
        if args[i].startswith("--"):
            has_value = i + 1 < len(args) and not args[i + 1].startswith("--")
            values[args[i]] = args[i + 1] if has_value else ""
            i += 2 if has_value else 1
        else:
            i += 1
    return values


def _command_change(name: str, old: artifacts.Generated, new: artifacts.Generated) -> CommandChange:
    before, after = _values(old.args), _values(new.args)
    return CommandChange(
        target=name,
        old_args=old.args,
        new_args=new.args,
        dropped=tuple(f for f in before if f not in after),
        added=tuple(f for f in after if f not in before),
        changed=tuple((f, before[f], after[f]) for f in before if f in after and before[f] != after[f]),
        error=old.error or new.error,
    )


def _launch_files(launches: Sequence[artifacts.Generated]) -> list[ConfigFile]:
    """Every target's new launch script, each under a name of its own."""
    files, seen = [], set()
    for generated in launches:
        for file in generated.files:
            name, n = file.name, 2
            while name in seen:
                stem, dot, ext = file.name.rpartition(".")
                name = f"{stem}-{n}.{ext}" if dot else f"{file.name}-{n}"
                n += 1
            seen.add(name)
            files.append(replace(file, name=name))
    return files


# -- (c) defaults and sizing ---------------------------------------------------------------------


def _is_big_a100(spec: calculator.SizingSpec | None) -> bool:
    gpu = spec.gpu if spec else None
    return bool(gpu and "a100" in (gpu.key + gpu.name).lower() and gpu.memory_mib >= 70 * 1024)


def default_findings(
    table: Table, old: Version, new: Version, targets: Sequence[Target]
) -> list[DefaultFinding]:
    found = []
    for change in table.default_changes(old, new):
        applies: list[Message] = []
        if change.id == "a100_batch_defaults":
            for t in targets:
                if not _is_big_a100(t.sizing):
                    continue
                unset = t.sizing is not None and t.sizing.max_num_seqs is None
                applies.append(
                    later("%(name)s runs on A100 80 GB and leaves them unset: it gets the new defaults.",
                          name=t.name)
                    if unset
                    else later("%(name)s runs on A100 80 GB and sets them: no change.", name=t.name)
                )  # fmt: skip
        if change.id == "gpu_memory_utilization_092":
            for t in targets:
                value = t.sizing.gpu_memory_utilization if t.sizing else None
                if value is not None and abs(value - float(change.before)) < 1e-9:
                    applies.append(
                        later(
                            "%(name)s has %(value)s in the inventory, the old default: if its command "
                            "line leaves the flag out, it gets %(new)s (the sizing shows both).",
                            name=t.name,
                            value=f"{value:g}",
                            new=change.after,
                        )
                    )
        found.append(
            DefaultFinding(change, texts.text(change.id) or Message(change.note or change.id), tuple(applies))
        )
    return found


def modelled_version(version: Version) -> tuple[str, Message | None]:
    """The version the calculator sizes `version` with ("" when it cannot), and a note."""
    minor = version[:2]
    if version < (0, 8, 0):
        return "", later(
            "vLLM %(version)s runs the V0 engine, whose memory accounting the calculator does not model.",
            version=label(version),
        )
    if minor < sizing_versions.OLDEST:
        oldest = "{}.{}".format(*sizing_versions.OLDEST)
        return oldest, later(
            "vLLM %(version)s is sized with the V1 accounting of %(oldest)s, the oldest the calculator "
            "models.",
            version=label(version),
            oldest=oldest,
        )
    if minor > sizing_versions.NEWEST:
        return "", later(
            "vLLM %(version)s sizes its KV cache with an accounting the calculator does not model yet "
            "(up to %(newest)s).",
            version=label(version),
            newest="{}.{}".format(*sizing_versions.NEWEST),
        )
    return label(version), None


def _case(title: Message, spec: calculator.SizingSpec, modelled: str, note: Message | None) -> SizingCase:
    if not modelled:
        return SizingCase(title, problem=note)
    try:
        return SizingCase(title, modelled, calculator.compute(replace(spec, vllm_version=modelled)))
    except (calculator.SpecError, ValueError) as exc:
        return SizingCase(title, modelled, problem=exc.args[0])


def _joined(problems: Sequence[Message]) -> Message | None:
    if not problems:
        return None
    joined = problems[0]
    for problem in problems[1:]:
        joined = later("%(first)s; %(second)s", first=joined, second=problem)
    return joined


def sizing_diff(target: Target, old: Version, new: Version) -> SizingDiff:
    """The calculator's answer for the target's flags under both versions; where the new version
    changes a default the launch may leave to vLLM, that variant too."""
    spec = target.sizing
    if spec is None:
        return SizingDiff(
            target.name, problem=_joined(target.sizing_problems) or later("the instance could not be sized")
        )
    old_modelled, old_note = modelled_version(old)
    new_modelled, new_note = modelled_version(new)
    notes = [n for n in (old_note, new_note) if n is not None]
    old_spec = spec
    if old_modelled and old < (0, 9, 0) and _is_big_a100(spec) and spec.max_num_seqs is None:
        old_spec = replace(
            spec,
            max_num_seqs=_OLD_BIG_GPU_SEQS,
            max_num_batched_tokens=spec.max_num_batched_tokens or _OLD_BIG_GPU_BATCHED,
        )
        notes.append(
            later(
                "vLLM %(version)s gave A100 80 GB %(seqs)s sequences and %(tokens)s batched tokens by "
                "default; the before column uses them.",
                version=label(old),
                seqs=_OLD_BIG_GPU_SEQS,
                tokens=_OLD_BIG_GPU_BATCHED,
            )
        )
    cases = [
        _case(later("vLLM %(version)s", version=label(old)), old_spec, old_modelled, old_note),
        _case(later("vLLM %(version)s", version=label(new)), spec, new_modelled, new_note),
    ]
    if old_modelled and new_modelled and spec.gpu_memory_utilization is not None:
        old_default = sizing_versions.behaviour(old_modelled).default_gpu_memory_utilization
        new_default = sizing_versions.behaviour(new_modelled).default_gpu_memory_utilization
        if old_default != new_default and abs(spec.gpu_memory_utilization - old_default) < 1e-9:
            cases.append(
                _case(
                    later(
                        "vLLM %(version)s without %(flag)s (default %(value)s)",
                        version=label(new),
                        flag="--gpu-memory-utilization",
                        value=f"{new_default:g}",
                    ),
                    replace(spec, gpu_memory_utilization=None),
                    new_modelled,
                    None,
                )
            )
    return SizingDiff(target.name, tuple(cases), tuple(notes))
