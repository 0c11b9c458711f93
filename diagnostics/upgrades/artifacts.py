"""The configs the console generates for a vLLM version (launch command, Prometheus alert
rules, Grafana dashboard), from the same generators as the configs pages, and the `vllm:*`
metrics each rule and panel reads."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from core.i18n import Message
from diagnostics.configgen import launch, registry, vllm_flags, vllm_metric_names
from diagnostics.configgen.base import ConfigFile, SpecErrors
from diagnostics.sizing.versions import nearest_choice
from diagnostics.upgrades.facts import Version, label, metric_base

_METRIC = re.compile(r"vllm:[A-Za-z0-9_:]+")
LAUNCH_KEY, ALERTS_KEY, DASHBOARD_KEY = "vllm", "alerts", "grafana"


@dataclass(frozen=True)
class Usage:
    """One rule or panel and the `vllm:*` metrics (base names) it reads."""

    user: str  # the alert name or the panel title, as the file has it
    metrics: tuple[str, ...]


@dataclass(frozen=True)
class Generated:
    key: str  # vllm, alerts, grafana
    choice: str  # the generator's version choice used ("0.11" for 0.11.2)
    files: tuple[ConfigFile, ...] = ()
    error: Message | None = None
    args: tuple[str, ...] = ()  # a launch command's flags and values

    @property
    def ok(self) -> bool:
        return self.error is None


def choice(version: Version, choices: tuple[str, ...]) -> str:
    """The generator's version choice that covers `version` (the newest not after it)."""
    return nearest_choice(label(version), choices)


def metrics_in(text: str) -> tuple[str, ...]:
    """The `vllm:*` metric names a PromQL expression reads, as base names, in order, once each."""
    return tuple(dict.fromkeys(metric_base(name) for name in _METRIC.findall(text)))


def _generate(key: str, values: Mapping[str, str], version_choice: str) -> Generated:
    generator = registry.get(key)
    names = {f.name for f in generator.fields}
    given = {k: v for k, v in values.items() if k in names}
    given["vllm_version"] = version_choice
    try:
        spec = generator.spec(given)
    except SpecErrors as exc:
        why = "; ".join(f"{name}: {message}" for name, message in exc.errors.items())
        # The generator's own messages, already in the reader's language: nothing more to translate.
        return Generated(
            key, version_choice, error=Message("%(generator)s: %(why)s", {"generator": key, "why": why})
        )
    args: tuple[str, ...] = ()
    if isinstance(spec, launch.LaunchSpec):
        args = tuple(launch.serve_args(spec)[0])
    return Generated(key, version_choice, files=tuple(generator.render(spec)), args=args)


def launch_command(version: Version, values: Mapping[str, str]) -> Generated:
    """`vllm serve` for the version, from a launch's values (configgen_fill.from_instance)."""
    return _generate(LAUNCH_KEY, values, choice(version, vllm_flags.SUPPORTED_VERSIONS))


def alert_rules(version: Version) -> Generated:
    return _generate(ALERTS_KEY, {}, choice(version, vllm_metric_names.VERSIONS))


def dashboard(version: Version) -> Generated:
    return _generate(DASHBOARD_KEY, {}, choice(version, vllm_metric_names.VERSIONS))


def alert_usages(generated: Generated) -> list[Usage]:
    """Each alert rule of generated rules and the metrics its expression reads."""
    usages = []
    for file in generated.files:
        for group in (yaml.safe_load(file.content) or {}).get("groups", []):
            for rule in group.get("rules", []):
                found = metrics_in(str(rule.get("expr", "")))
                if found:
                    usages.append(Usage(str(rule.get("alert", "")), found))
    return usages


def dashboard_usages(generated: Generated) -> list[Usage]:
    """Each panel of a generated dashboard and the metrics its queries read."""
    usages = []
    for file in generated.files:
        for panel in json.loads(file.content).get("panels", []):
            found = metrics_in(" ".join(str(t.get("expr", "")) for t in panel.get("targets", [])))
            if found:
                usages.append(Usage(str(panel.get("title", "")), found))
    return usages
