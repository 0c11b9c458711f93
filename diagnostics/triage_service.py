"""Log triage at Django's edge: a paste is triaged at once; an upload is kept as a file
(Django streams it to disk in chunks) and triaged by a worker that records its progress."""

from __future__ import annotations

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.i18n import later
from diagnostics.models import TriageRun
from diagnostics.triage.engine import TriageInputError, triage_stream, triage_text

PASTE_MAX_BYTES = 2_000_000
PROGRESS_EVERY_BYTES = 32 << 20
# A gzip upload is read through, up to this many times the upload limit: a log compresses
# ten or twenty times; a "gzip bomb" of a few MB that inflates to terabytes is refused.
GUNZIPPED_FACTOR = 16


def triage_paste(text: str) -> dict:
    if not text.strip():
        raise TriageInputError(later("paste a log, or choose a file"))
    if len(text.encode(errors="surrogatepass")) > PASTE_MAX_BYTES:
        raise TriageInputError(
            later(
                "a paste holds up to %(limit)s bytes; upload larger logs as a file",
                limit=f"{PASTE_MAX_BYTES:,}",
            )
        )
    return triage_text(text).to_dict()


def start_upload(*, upload, user: str) -> TriageRun:
    """Keep the uploaded file and queue its triage; TriageInputError when it is too large."""
    limit = settings.TRIAGE_MAX_UPLOAD_BYTES
    if upload.size > limit:
        raise TriageInputError(
            later(
                "%(name)s is %(size)s bytes; the limit is %(limit)s (TRIAGE_MAX_UPLOAD_BYTES)",
                name=upload.name,
                size=f"{upload.size:,}",
                limit=f"{limit:,}",
            )
        )
    if upload.size == 0:
        raise TriageInputError(later("%(name)s is empty", name=upload.name))
    run = TriageRun.objects.create(
        filename=upload.name[:255], size_bytes=upload.size, created_by=user, file=upload
    )
    from diagnostics.tasks import triage_upload

    transaction.on_commit(lambda: triage_upload.delay(run_id=run.pk))
    return run


def run_upload(*, run_id: int) -> TriageRun:
    """Triage a stored upload, recording progress; the file is removed afterwards."""
    run = TriageRun.objects.get(pk=run_id)
    if run.is_finished:
        return run
    run.status = TriageRun.Status.RUNNING
    run.save(update_fields=["status"])
    last = [0]

    def progress(done: int) -> None:
        if done - last[0] >= PROGRESS_EVERY_BYTES:
            last[0] = done
            TriageRun.objects.filter(pk=run.pk).update(bytes_read=done)

    try:
        with run.file.open("rb") as handle:
            result = triage_stream(
                handle, progress=progress, max_bytes=settings.TRIAGE_MAX_UPLOAD_BYTES * GUNZIPPED_FACTOR
            )
    except SoftTimeLimitExceeded:  # the task's time is up: the run ends, rather than polls for ever
        exc = TriageInputError(later("the triage ran out of time; triage a part of the log (tail -n ...)"))
        run.status, run.error = TriageRun.Status.FAILED, str(exc)
        run.result = {"error_message": exc.message.to_json()}
    except TriageInputError as exc:
        # The English text in `error` (the API, old readers); the message, to show in the
        # reader's language, where a failed run keeps no result.
        run.status, run.error = TriageRun.Status.FAILED, str(exc)[:500]
        run.result = {"error_message": exc.message.to_json()}
    except OSError as exc:
        run.status, run.error = TriageRun.Status.FAILED, str(exc)[:500]
    else:
        run.status, run.result, run.bytes_read = TriageRun.Status.DONE, result.to_dict(), result.bytes
    run.finished_at = timezone.now()
    run.file.delete(save=False)
    run.save()
    return run
