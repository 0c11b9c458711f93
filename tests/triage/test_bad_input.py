"""What the triage reads is outside bytes: a damaged gzip, a lone surrogate in a paste, JSON
lines nested past reason, access lines with impossible times or numbers are answered, or
refused with a TriageInputError that says what is wrong, and an upload's run always ends."""

import gzip
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from diagnostics import triage_service
from diagnostics.models import TriageRun
from diagnostics.triage.engine import TriageInputError, triage_stream, triage_text
from tests.hang import ends

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
PACKED = gzip.compress(OOM.encode() * 1000)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (PACKED[: len(PACKED) // 2], "Compressed file ended before the end-of-stream marker"),
        (PACKED[:20] + b"\x00" * 50 + PACKED[70:], "Error -3 while decompressing data"),
        (b"\x1f\x8b", "Compressed file ended before the end-of-stream marker"),
        (b"\x1f\x8b\x09" + b"\x00" * 30, "Unknown compression method"),
    ],
)
def test_a_damaged_gzip_is_refused_saying_so(data, said):
    with pytest.raises(TriageInputError) as refused:
        ends(triage_text, data)
    assert str(refused.value).startswith("the gzip file is damaged or cut short (")
    assert said in str(refused.value) and str(refused.value).endswith("check it with gzip -t")


def test_a_gzip_that_inflates_past_the_bound_is_refused_before_it_is_read_whole():
    bomb = gzip.compress(b"x" * (64 << 20))
    assert len(bomb) < 100_000
    with pytest.raises(TriageInputError, match="the log is over 16,777,216 bytes"):
        ends(triage_stream, io.BytesIO(bomb), max_bytes=16 << 20)


def test_a_paste_with_a_lone_surrogate_is_triaged_like_any_other_text():
    result = ends(triage_service.triage_paste, "\udcff\ud800 " + OOM)
    assert result["category"] == "oom.gpu"


def test_json_lines_nested_past_reason_are_read_as_plain_lines():
    lines = b'{"msg": "starting"}\n' * 5 + b'{"msg": ' + b"[" * 100_000 + b"\n" + OOM.encode()
    assert ends(triage_text, lines).category == "oom.gpu"


def test_access_lines_with_impossible_times_or_huge_numbers_are_left_out_of_the_story():
    good = b'10.0.0.1 - - [10/Oct/2026:13:55:36 +0000] "POST /v1/completions HTTP/1.1" 200 12 rt=3\n'
    impossible = b'10.0.0.2 - - [99/Zzz/9999:99:99:99 +0000] "POST /v1/completions HTTP/1.1" 200 12 rt=3\n'
    huge = (
        b'10.0.0.3 - - [10/Oct/2026:13:55:36 +0000] "POST /v1/completions HTTP/1.1" 200 12 rt=' + b"9" * 5000
    )
    result = ends(triage_text, good * 3 + impossible + huge + b"\n")
    assert result.access["lines"] == 4
    assert {talker["ip"] for talker in result.access["top_talkers"]} == {"10.0.0.1", "10.0.0.3"}


@pytest.mark.django_db
def test_an_upload_of_a_damaged_gzip_ends_its_run_failed_saying_so(client, cast, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(cast.engineer)
    upload = SimpleUploadedFile("vllm.log.gz", PACKED[: len(PACKED) // 2])
    client.post(reverse("diagnostics:triage"), {"file": upload})
    run = TriageRun.objects.get()
    triage_service.run_upload(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith("the gzip file is damaged or cut short")
    page = client.get(reverse("diagnostics:triage-run", args=[run.pk]))
    assert page.status_code == 200 and "the gzip file is damaged" in page.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "status", "said"),
    [
        ("\x00\x01\x02 binary", 400, "this is not a text log (it holds NUL bytes)"),
        ("\x1b[31m" + OOM * 3, 200, "OOM: GPU memory"),
        ("x" * 1_500_000, 200, ""),
    ],
)
def test_a_pasted_log_of_any_bytes_gets_a_page_not_a_500(client, cast, text, status, said):
    client.force_login(cast.engineer)
    response = client.post(reverse("diagnostics:triage"), {"text": text})
    assert response.status_code == status and said in response.content.decode()
