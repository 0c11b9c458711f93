"""The upgrade diff's form: from which version, to which, for one instance or the whole fleet."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from diagnostics.upgrades import diff, facts, present
from diagnostics.upgrades.facts import VersionError
from fleet.models import Engine, Instance


class UpgradeForm(forms.Form):
    from_version = forms.CharField(
        label=_("From vLLM version"),
        max_length=40,
        required=False,
        help_text=_("The version running now, like 0.8.5. Blank: the instance's version in the inventory."),
        widget=forms.TextInput(attrs={"placeholder": "0.8.5", "autocomplete": "off", "spellcheck": "false"}),
    )
    to_version = forms.CharField(
        label=_("To vLLM version"),
        max_length=40,
        help_text=_("The version to upgrade to, like 0.11.2."),
        widget=forms.TextInput(attrs={"placeholder": "0.11.2", "autocomplete": "off", "spellcheck": "false"}),
    )
    instance = forms.ModelChoiceField(
        queryset=Instance.objects.none(),
        required=False,
        label=_("Instance"),
        empty_label=_("Whole fleet (every enabled vLLM instance)"),
    )

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["instance"].queryset = Instance.objects.filter(engine=Engine.VLLM).order_by("name")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        instance = data.get("instance")
        old = (data.get("from_version") or "").strip()
        if not old and instance is not None:
            old = instance.engine_version.strip()
        if not old:
            self.add_error("from_version", _("Give the version running now."))
            return data
        data["from_version"] = old
        new = (data.get("to_version") or "").strip()
        for field, text in (("from_version", old), ("to_version", new)):
            if text:
                try:
                    facts.checked_version(text)
                except VersionError as exc:
                    self.add_error(field, present.html(exc.args[0]))
        if new and not self.errors:
            try:
                diff.versions(old, new)
            except VersionError as exc:  # in the wrong order
                self.add_error("to_version", present.html(exc.args[0]))
        return data
