from __future__ import annotations

from django import forms

from incidents.models import Incident


class IncidentForm(forms.ModelForm):
    class Meta:
        model = Incident
        fields = (*Incident.EDITABLE_FIELDS, "hosts", "instances")
        widgets = {
            name: forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
            for name in ("started_at", "detected_at", "acknowledged_at", "resolved_at")
        }

    def clean(self):
        data = super().clean()
        started, resolved = data.get("started_at"), data.get("resolved_at")
        if started and resolved and resolved < started:
            self.add_error("resolved_at", "An incident cannot be resolved before it started.")
        if data.get("status") == "resolved" and not resolved:
            self.add_error("resolved_at", "Give the time it was resolved.")
        return data


class NoteForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}), max_length=20_000, label="Note (Markdown)"
    )
