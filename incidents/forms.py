from __future__ import annotations

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from incidents.models import Incident


class IncidentForm(forms.ModelForm):
    class Meta:
        model = Incident
        fields = (*Incident.EDITABLE_FIELDS, "hosts", "instances")
        widgets = {
            name: forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
            for name in ("started_at", "detected_at", "acknowledged_at", "resolved_at")
        } | {  # user, host and instance names stay as they are in every language
            "owner": forms.Select(attrs={"translate": "no"}),
            "hosts": forms.SelectMultiple(attrs={"translate": "no"}),
            "instances": forms.SelectMultiple(attrs={"translate": "no"}),
        }
        # The labels the edit entries keep too ("Severity: major → critical").
        labels = {
            "title": _("Title"),
            "category": _("Category"),
            "severity": _("Severity"),
            "status": _("Status"),
            "started_at": _("Started at"),
            "detected_at": _("Detected at"),
            "acknowledged_at": _("Acknowledged at"),
            "resolved_at": _("Resolved at"),
            "root_cause": _("Root cause"),
            "resolution": _("Resolution"),
            "follow_ups": _("Follow-up actions"),
            "owner": _("Owner"),
            "hosts": _("Hosts"),
            "instances": _("Instances"),
        }

    def clean(self):
        data = super().clean()
        started, resolved = data.get("started_at"), data.get("resolved_at")
        if started and resolved and resolved < started:
            self.add_error("resolved_at", gettext("An incident cannot be resolved before it started."))
        if data.get("status") == "resolved" and not resolved:
            self.add_error("resolved_at", gettext("Give the time it was resolved."))
        return data


class NoteForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}), max_length=20_000, label=_("Note (Markdown)")
    )
