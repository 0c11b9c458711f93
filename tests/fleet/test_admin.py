"""The admin entry points the README names (the Django admin is for superusers)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from fleet.models import ProbeSettings

pytestmark = pytest.mark.django_db


def test_probe_settings_open_from_the_admin_list_on_the_one_row(admin_client):
    client = admin_client
    index = client.get(reverse("admin:index")).content.decode()
    assert reverse("admin:fleet_probesettings_changelist") in index
    response = client.get(reverse("admin:fleet_probesettings_changelist"), follow=True)
    assert response.status_code == 200
    assert "Connect above (s) → network" in response.content.decode()
    assert ProbeSettings.objects.count() == 1


def test_a_threshold_edited_in_the_admin_is_what_the_probes_read(admin_client):
    client = admin_client
    row = ProbeSettings.current()
    url = reverse("admin:fleet_probesettings_change", args=[row.pk])
    form = client.get(url).context["adminform"].form
    data = {name: form.initial[name] for name in form.fields}
    data["connect_s"] = 2.5
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert ProbeSettings.current().connect_s == 2.5
    assert client.get(reverse("admin:fleet_probesettings_add")).status_code == 403
