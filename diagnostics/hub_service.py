"""Models fetched from the Hugging Face Hub, at Django's edge: the sizing catalogue is the
cache. A model asked for by its id comes from the catalogue when it is there (shipped, uploaded
or fetched before); otherwise, or when asked to fetch again, from the hub named by the
settings (HF_ENDPOINT, HF_TOKEN, HUB_FETCH_TIMEOUT_S), saved with its source URLs and the
date it was fetched."""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from diagnostics import sizing_service
from diagnostics.models import ModelSpec
from diagnostics.sizing import hub
from diagnostics.sizing.catalog import CatalogEntry


def model_for_hf_id(
    hf_id: str, *, refresh: bool = False, params_total: float | None = None
) -> tuple[ModelSpec, bool]:
    """The catalogue's model with this id and whether it was fetched now: from the hub when the
    catalogue lacks it or `refresh` is set. hub.HubError when it cannot be had."""
    hf_id = hub.parse_id(hf_id)
    cached = ModelSpec.objects.for_hf_id(hf_id)
    if cached is not None and not refresh:
        return cached, False
    entry = hub.fetch(
        hf_id,
        endpoint=settings.HF_ENDPOINT,
        token=settings.HF_TOKEN or None,
        timeout=settings.HUB_FETCH_TIMEOUT_S,
        params_total=params_total,
    )
    return save_fetched(entry), True


def save_fetched(entry: CatalogEntry) -> ModelSpec:
    """Keep a fetched model in the catalogue: its earlier copy refreshed in place (same key,
    so shared sizing links still work), else a new one under a key of its own."""
    for _ in range(2):  # a concurrent fetch of the same id may save it first: then refresh that one
        try:
            with transaction.atomic():
                return _save(entry)
        except IntegrityError:
            continue
    raise IntegrityError(f"could not save {entry.hf_id} fetched from the hub")


def _save(entry: CatalogEntry) -> ModelSpec:
    spec = ModelSpec.objects.filter(source=ModelSpec.Source.HUB, hf_id__iexact=entry.hf_id).first()
    if spec is None:
        spec = ModelSpec.from_entry(
            replace(entry, key=sizing_service.free_key(entry.key)), source=ModelSpec.Source.HUB
        )
    else:
        spec.reread(entry)
    if entry.params_total:
        spec.params_total = entry.params_total
    spec.fetched_at = timezone.now()
    spec.save()
    return spec


_STATUS = {
    hub.Problem.NOT_FOUND: 404,
    hub.Problem.UNREACHABLE: 502,
    hub.Problem.HUB_ERROR: 502,
    hub.Problem.TIMEOUT: 504,
}


def http_status(error: hub.HubError) -> int:
    """The HTTP status of an answer carrying this error: the hub out of reach or failing is a
    bad gateway (a gateway timeout when it did not answer); a model it lacks, not found; the
    rest are the request's own (400)."""
    return _STATUS.get(error.problem, 400)
