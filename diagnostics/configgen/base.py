"""What every config generator is made of: its input fields (which become the form, the URL
and `manage.py genconfig --set`), presets, a pure render from a validated spec to files, and
cross-checks shown beside the preview.

A generator module exposes one `GENERATOR = Generator(...)`. Values arrive as strings
(query string, form, CLI); `Generator.spec(values)` fills defaults, applies a preset, checks
every value with diagnostics.configgen.safety and builds the typed spec, or raises
SpecErrors naming each bad field. Nothing unchecked reaches `render`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext as _

from diagnostics.configgen.safety import UnsafeValue


@dataclass(frozen=True)
class Field:
    """One input. `label`, `help`, the choices' labels and `group` are shown to people (lazy
    translations, or identifiers in `backticks`); `default` and the choices' values reach the
    files and never change with the language."""

    name: str
    label: str
    default: str = ""
    help: str = ""
    kind: str = "text"  # text, int, float, bool, choice, lines (one value per line)
    choices: tuple[tuple[str, str], ...] = ()
    group: str = ""  # a heading the form groups fields under


@dataclass(frozen=True)
class Section:
    """A fieldset of a generator's form: the fields it shows, in order. Advanced sections are
    folded away; a field in no section is not shown and keeps its default (or the URL's value)."""

    legend: str
    fields: tuple[str, ...]
    advanced: bool = False


@dataclass(frozen=True)
class ConfigFile:
    name: str  # the file name it is saved as
    content: str
    language: str  # bash, nginx, yaml, json, python, ini: for the preview and the download type


@dataclass(frozen=True)
class Check:
    """A cross-check beside the preview: a problem (error, warning) or a confirmation (ok)."""

    severity: str  # error, warning, ok
    title: str
    why: str = ""
    fix: str = ""


class SpecErrors(ValueError):
    """Every bad field of one set of values, by field name."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{name}: {message}" for name, message in errors.items()))


@dataclass(frozen=True)
class Generator:
    key: str  # vllm, docker, k8s, systemd, nginx, client, alerts, grafana
    label: str  # English (gettext_noop-marked); `title` is the shown one
    description: str  # English (gettext_noop-marked); `about` is the shown one
    fields: tuple[Field, ...]
    build: Callable[
        [Mapping[str, str]], Any
    ]  # values (every field present) -> spec; raises UnsafeValue/ValueError
    render: Callable[[Any], list[ConfigFile]]
    checks: Callable[[Any], list[Check]] = lambda spec: []
    presets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    preset_labels: Mapping[str, str] = field(default_factory=dict)
    sections: tuple[Section, ...] = ()  # the form's fieldsets; none: one per field group, every field

    @property
    def title(self) -> str:
        return _(self.label)

    @property
    def about(self) -> str:
        return _(self.description)

    def defaults(self) -> dict[str, str]:
        return {f.name: f.default for f in self.fields}

    def values(self, given: Mapping[str, str], *, preset: str = "") -> dict[str, str]:
        """Defaults, then the preset, then what was given; unknown names are an error."""
        unknown = sorted(set(given) - {f.name for f in self.fields})
        if unknown:
            raise SpecErrors({name: _("no such setting for this generator") for name in unknown})
        if preset and preset not in self.presets:
            message = (
                _("no preset %(preset)s; presets: %(presets)s")
                % {"preset": repr(preset), "presets": ", ".join(self.presets)}
                if self.presets
                else _("no preset %(preset)s; presets: none") % {"preset": repr(preset)}
            )
            raise SpecErrors({"preset": message})
        values = self.defaults()
        values.update(self.presets.get(preset, {}))
        values.update({k: str(v) for k, v in given.items()})
        return values

    def spec(self, given: Mapping[str, str], *, preset: str = "") -> Any:
        values = self.values(given, preset=preset)
        errors = {f.name: message for f in self.fields if (message := _choice_error(f, values[f.name]))}
        if errors:
            raise SpecErrors(errors)
        try:
            return self.build(values)
        except UnsafeValue as exc:
            field_name, _sep, message = str(exc).partition(": ")
            raise SpecErrors({field_name: message or str(exc)}) from None


def _choice_error(f: Field, value: str) -> str:
    if f.kind == "choice" and value not in {v for v, _label in f.choices}:
        return _("%(value)s is not one of %(choices)s") % {
            "value": repr(value),
            "choices": ", ".join(v for v, _label in f.choices),
        }
    if f.kind == "bool" and value not in ("", "on", "off", "true", "false", "1", "0", "yes", "no"):
        return _("%(value)s is not on or off") % {"value": repr(value)}
    return ""


def flag(value: str) -> bool:
    """A bool field's value."""
    return value.strip().lower() in ("on", "true", "1", "yes")


def lines(value: str) -> list[str]:
    """A lines field's values: one per line (or comma-separated), blanks dropped."""
    return [part.strip() for part in value.replace(",", "\n").splitlines() if part.strip()]
