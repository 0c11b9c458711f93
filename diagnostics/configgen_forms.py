"""A Django form for any config generator, built from its fields; the generator's own
checks (diagnostics.configgen.safety) decide what is valid."""

from __future__ import annotations

from typing import Any

from django import forms

from diagnostics.configgen.base import Field, Generator

ON_OFF = [("on", "on"), ("off", "off")]


def _form_field(f: Field) -> forms.Field:
    options: dict[str, Any] = {"label": f.label, "help_text": f.help, "required": False}
    if f.kind == "choice":
        return forms.ChoiceField(choices=list(f.choices), **options)
    if f.kind == "bool":
        return forms.ChoiceField(choices=ON_OFF, **options)
    if f.kind == "lines":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), **options)
    widget = forms.TextInput(attrs={"inputmode": "decimal"} if f.kind in ("int", "float") else {})
    return forms.CharField(widget=widget, **options)


def config_form(generator: Generator, values: dict[str, str], errors: dict[str, str]) -> forms.Form:
    """An unbound form showing `values` (defaults, preset and what was given), with the
    generator's errors on their fields."""
    form_class = type(
        f"{generator.key.title()}ConfigForm",
        (forms.Form,),
        {f.name: _form_field(f) for f in generator.fields},
    )
    form = form_class(initial=values)
    form.field_errors = errors
    form.groups = _groups(generator, form)
    return form


def _groups(generator: Generator, form: forms.Form) -> list[tuple[str, list]]:
    groups: dict[str, list] = {}
    for f in generator.fields:
        groups.setdefault(f.group or "Settings", []).append(form[f.name])
    return list(groups.items())
