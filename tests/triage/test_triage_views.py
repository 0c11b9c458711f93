"""The triage page: a paste gets its answer at once; an upload is read by a real worker with
a progress bar that polls until it is done; limits give clear errors; the CLI agrees."""

import gzip
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from diagnostics.models import TriageRun
from diagnostics.triage_service import run_upload
from tests.conftest import HTMX_HEADERS, wait_for

LOG = """\
INFO 12-03 03:00:01 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has 79.19 GiB in all
Container exited with code 137
"""


@pytest.fixture
def engineer(client, cast):
    client.force_login(cast.engineer)
    return client


@pytest.mark.django_db
def test_a_pasted_log_gets_its_category_cause_fix_and_lines(engineer):
    content = engineer.post(reverse("diagnostics:triage"), {"text": LOG}).content.decode()
    assert "OOM: GPU memory" in content and "Likely root cause" in content
    assert "<mark>2: torch.OutOfMemoryError" in content
    assert "SIGKILL" in content and "Not proof of an OOM" in content


@pytest.mark.django_db
def test_a_paste_no_rule_is_sure_of_shows_no_category_its_lines_and_candidates(engineer):
    text = "INFO start\nERROR worker 3 lost rank 2 over NCCL\nValueError: wrong shape\nINFO stop\n"
    content = engineer.post(reverse("diagnostics:triage"), {"text": text}).content.decode()
    assert "No category: no rule is sure" in content and "No known failure" not in content
    assert "<code>ValueError: wrong shape</code>" in content
    assert "CUDA: NCCL communication error" in content and "nccl" in content


@pytest.mark.django_db
def test_an_empty_or_oversized_paste_is_refused_clearly(engineer):
    empty = engineer.post(reverse("diagnostics:triage"), {"text": "  "})
    assert empty.status_code == 400 and "paste a log" in empty.content.decode()
    big = engineer.post(reverse("diagnostics:triage"), {"text": "x\n" * 1_100_000})
    assert big.status_code == 400 and "upload" in big.content.decode()


@pytest.mark.django_db
def test_an_upload_becomes_a_run_whose_progress_polls_until_done(engineer, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    upload = SimpleUploadedFile("vllm.log.gz", gzip.compress(LOG.encode()))
    response = engineer.post(reverse("diagnostics:triage"), {"file": upload})
    run = TriageRun.objects.get()
    assert response.status_code == 302 and response.url == reverse("diagnostics:triage-run", args=[run.pk])
    waiting = engineer.get(response.url, HTTP_HX_TARGET="triage-run", **HTMX_HEADERS)
    assert waiting.status_code == 200 and 'hx-trigger="every 1s"' in waiting.content.decode()
    run_upload(run_id=run.pk)
    done = engineer.get(response.url, HTTP_HX_TARGET="triage-run", **HTMX_HEADERS)
    assert done.status_code == 286  # stops the polling
    assert "OOM: GPU memory" in done.content.decode()
    run.refresh_from_db()
    assert run.status == "done" and not run.file and run.bytes_read == len(LOG.encode())


@pytest.mark.django_db
def test_an_upload_over_the_limit_or_unreadable_fails_clearly(engineer, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.TRIAGE_MAX_UPLOAD_BYTES = 10
    big = engineer.post(reverse("diagnostics:triage"), {"file": SimpleUploadedFile("a.log", b"x" * 11)})
    assert big.status_code == 400 and "the limit is 10" in big.content.decode()
    settings.TRIAGE_MAX_UPLOAD_BYTES = 1 << 20
    engineer.post(reverse("diagnostics:triage"), {"file": SimpleUploadedFile("u.log", "hé".encode("utf-16"))})
    run = TriageRun.objects.get()
    run_upload(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "UTF-16" in run.error


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_triages_an_upload(client, cast, settings, tmp_path, celery_worker_thread):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(cast.engineer)
    client.post(reverse("diagnostics:triage"), {"file": SimpleUploadedFile("vllm.log", LOG.encode())})
    run = TriageRun.objects.get()
    assert wait_for(lambda: TriageRun.objects.get(pk=run.pk).status == "done", 30)
    assert TriageRun.objects.get(pk=run.pk).result["category"] == "oom.gpu"


def test_the_cli_prints_the_same_answer_as_json(tmp_path):
    path = tmp_path / "vllm.log"
    path.write_text(LOG)
    out = io.StringIO()
    call_command("triage", str(path), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["category"] == "oom.gpu" and data["matches"][0]["line"] == 2
    assert {"category", "root_cause", "fix", "matches", "secondary"} <= set(data)
    text = io.StringIO()
    call_command("triage", str(path), stdout=text)
    assert "Category:   OOM: GPU memory (oom.gpu)" in text.getvalue()


def test_the_cli_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("triage", str(tmp_path / "missing.log"), stdout=io.StringIO())
    binary = tmp_path / "core"
    binary.write_bytes(b"\x7fELF\x00\x00")
    with pytest.raises(CommandError, match="NUL"):
        call_command("triage", str(binary), stdout=io.StringIO())
