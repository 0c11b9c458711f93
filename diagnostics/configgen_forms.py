"""A Django form for any config generator, built from the fields its sections show; the
generator's own checks (diagnostics.configgen.safety) decide what is valid. Fields a
generator does not show keep their defaults, or the URL's value carried as a hidden input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from diagnostics.configgen.base import Field, Generator, Section

ON_OFF = [("on", pgettext_lazy("switch", "on")), ("off", pgettext_lazy("switch", "off"))]
SETTINGS = pgettext_lazy("config generator", "Settings")


class ValueSelect(forms.Select):
    """A select whose options with a plain-string label are identifiers (auto, fp8, 0.11,
    --ipc=host, a GPU model): marked translate="no". Words people read are lazy translations."""

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        if isinstance(label, str):
            option["attrs"]["translate"] = "no"
        return option


def inline_code(text: str) -> SafeString:
    """Text whose `backticked` parts show as <code>, the rest escaped; an unpaired backtick
    is dropped rather than shown."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:
        return conditional_escape("".join(parts))
    html = "".join(
        f"<code>{conditional_escape(part)}</code>" if i % 2 else str(conditional_escape(part))
        for i, part in enumerate(parts)
    )
    return mark_safe(html)  # noqa: S308 (every part is escaped above)


@dataclass(frozen=True)
class FormSection:
    legend: str
    fields: list[forms.BoundField]
    advanced: bool


def sections(generator: Generator) -> tuple[Section, ...]:
    """The generator's fieldsets; a generator without any gets one per field group."""
    if generator.sections:
        return generator.sections
    groups: dict[str, list[str]] = {}
    for f in generator.fields:
        groups.setdefault(f.group or SETTINGS, []).append(f.name)
    return tuple(Section(legend, tuple(names)) for legend, names in groups.items())


def shown_names(generator: Generator) -> list[str]:
    return [name for section in sections(generator) for name in section.fields]


def _form_field(f: Field) -> forms.Field:
    # Labels and help texts: `backticked` identifiers show as <code>.
    options: dict[str, Any] = {
        "label": inline_code(f.label),
        "help_text": inline_code(f.help),
        "required": False,
    }
    if f.kind == "choice":
        return forms.ChoiceField(choices=list(f.choices), widget=ValueSelect, **options)
    if f.kind == "bool":
        return forms.ChoiceField(choices=ON_OFF, **options)
    if f.kind == "lines":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), **options)
    widget = forms.TextInput(attrs={"inputmode": "decimal"} if f.kind in ("int", "float") else {})
    return forms.CharField(widget=widget, **options)


def config_form(generator: Generator, values: dict[str, str], errors: dict[str, str]) -> forms.Form:
    """An unbound form of the fields the generator shows, with `values` (defaults, preset and
    what was given) and the generator's errors on their fields. A field it does not show but
    whose value is wrong (from a link) is shown too, under "Other settings", to be fixable."""
    by_name = {f.name: f for f in generator.fields}
    layout = list(sections(generator))
    stray = [name for name in errors if name in by_name and name not in shown_names(generator)]
    if stray:
        layout.append(Section(_("Other settings in the link"), tuple(stray)))
    names = [name for section in layout for name in section.fields]
    form_class = type(
        f"{generator.key.title()}ConfigForm", (forms.Form,), {n: _form_field(by_name[n]) for n in names}
    )
    form = form_class(initial=values)
    if names:
        form.fields[names[0]].widget.attrs["autofocus"] = True
    form.field_errors = errors
    form.sections = [
        FormSection(section.legend, [form[n] for n in section.fields], section.advanced) for section in layout
    ]
    form.has_advanced = any(s.advanced for s in layout)
    form.advanced_open = any(n in errors for s in layout if s.advanced for n in s.fields)
    return form
