"""Import and export from the pages: dry run first, line-numbered errors, all or nothing."""

import textwrap

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from fleet.models import ChangeLogEntry, GpuHost
from tests.factories import make_host

pytestmark = pytest.mark.django_db

GOOD = textwrap.dedent("""\
    hosts:
      - name: gpu-new-01
        address: 10.3.0.1
      - name: gpu-new-02
        address: 10.3.0.2
""")
BAD = textwrap.dedent("""\
    hosts:
      - name: gpu-new-01
        address: 10.3.0.1
      - name: gpu-new-02
        address: http://10.3.0.2
""")


def test_the_export_downloads_yaml_and_csv(viewer_client):
    make_host(name="exported-01")
    for fmt, marker in [("yaml", "name: exported-01"), ("csv", "kind,")]:
        response = viewer_client.get(reverse("fleet:export"), {"format": fmt})
        assert response.status_code == 200
        assert f".{fmt}" in response["Content-Disposition"]
        assert marker in response.content.decode()


def test_an_unknown_export_format_is_a_clear_400(viewer_client):
    response = viewer_client.get(reverse("fleet:export"), {"format": "xml"})
    assert response.status_code == 400 and b"yaml or csv" in response.content


def test_viewers_cannot_import(viewer_client):
    assert viewer_client.get(reverse("fleet:import")).status_code == 403
    assert viewer_client.post(reverse("fleet:import-apply"), {"text": GOOD}).status_code == 403


def test_the_dry_run_shows_the_plan_and_changes_nothing(sre_client):
    response = sre_client.post(reverse("fleet:import-preview"), {"text": GOOD, "format": "auto"})
    content = response.content.decode()
    assert response.status_code == 200
    assert "2 to create" in content and "gpu-new-02" in content
    assert not GpuHost.objects.exists()


def test_an_uploaded_file_with_a_bad_row_names_its_line_and_imports_nothing(sre_client):
    upload = SimpleUploadedFile("fleet.yaml", BAD.encode())
    response = sre_client.post(reverse("fleet:import-preview"), {"file": upload, "format": "auto"})
    content = response.content.decode()
    assert response.status_code == 400
    assert "line 4" in content and "nothing was imported" in content
    assert not GpuHost.objects.exists()


def test_applying_imports_everything_and_logs_it_as_a_web_import(sre_client, cast):
    response = sre_client.post(reverse("fleet:import-apply"), {"text": GOOD, "fmt": "yaml"})
    assert response.status_code == 302
    assert set(GpuHost.objects.values_list("name", flat=True)) == {"gpu-new-01", "gpu-new-02"}
    entry = ChangeLogEntry.objects.filter(object_repr="gpu-new-01").get()
    assert (entry.actor, entry.source) == (cast.sre, "web")


def test_applying_a_file_that_went_bad_since_the_preview_changes_nothing(sre_client):
    response = sre_client.post(reverse("fleet:import-apply"), {"text": BAD, "fmt": "yaml"})
    assert response.status_code == 400
    assert not GpuHost.objects.exists()


def test_a_file_that_is_not_utf8_text_is_refused_clearly(sre_client):
    upload = SimpleUploadedFile("fleet.yaml", b"\xff\xfe\x00binary")
    response = sre_client.post(reverse("fleet:import-preview"), {"file": upload, "format": "auto"})
    assert response.status_code == 400 and b"not UTF-8 text" in response.content


def test_an_empty_submission_asks_for_a_file_or_text(sre_client):
    response = sre_client.post(reverse("fleet:import-preview"), {"text": "  ", "format": "auto"})
    assert response.status_code == 400 and b"Choose a file or paste" in response.content


_ALIASED = "a: &a [x, x, x, x, x, x, x, x, x]\nhosts: [" + ", ".join(["*a"] * 20_000) + "]\n"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("hosts:\n  - name: gpu-new-01\x11\n", "line 2:"),
        ("hosts: [" + "[" * 100 + "]" * 100 + "]\n", "collections nested more than 32 deep"),
        (_ALIASED, "aliases repeat"),
        ("hosts:\n  - {name: gpu-new-01, cpu_cores: 2026-13-45}\n", "cannot read the value"),
    ],
)
def test_a_malformed_paste_is_a_clear_error_in_the_page_and_changes_nothing(sre_client, text, shown):
    response = sre_client.post(reverse("fleet:import-preview"), {"text": text, "format": "yaml"})
    content = response.content.decode()
    assert response.status_code == 400
    assert "nothing was imported" in content and shown in content
    assert not GpuHost.objects.exists() and not ChangeLogEntry.objects.exists()


def test_an_uploaded_file_with_a_nul_byte_names_its_line_and_imports_nothing(sre_client):
    upload = SimpleUploadedFile(
        "fleet.csv", b"kind,name,address\nhost,gpu-new-01,10.3.0.1\nhost,b\x00,10.3.0.2\n"
    )
    response = sre_client.post(reverse("fleet:import-preview"), {"file": upload, "format": "auto"})
    content = response.content.decode()
    assert response.status_code == 400
    assert "line 3:" in content and "U+0000" in content
    assert not GpuHost.objects.exists()


def test_an_uploaded_file_that_is_not_utf8_names_the_line_and_column_of_the_bad_byte(sre_client):
    upload = SimpleUploadedFile("fleet.yaml", b"hosts:\n  - name: caf\xe9\n")
    response = sre_client.post(reverse("fleet:import-preview"), {"file": upload, "format": "auto"})
    assert response.status_code == 400
    assert "Line 2, column 14: the file is not UTF-8 text (byte 0xE9)" in response.content.decode()


def test_applying_a_malformed_text_posted_directly_changes_nothing(sre_client):
    text = GOOD + "  - name: gpu-new-03\x00\n"
    response = sre_client.post(reverse("fleet:import-apply"), {"text": text, "fmt": "yaml"})
    assert response.status_code == 400 and "U+0000" in response.content.decode()
    assert not GpuHost.objects.exists() and not ChangeLogEntry.objects.exists()
