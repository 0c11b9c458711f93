"""Copy the shipped model catalogue into the database: models it lacks are added, models
already there (perhaps edited in the admin) are left alone."""

from __future__ import annotations

from typing import Any

from diagnostics.sizing.catalog import CatalogEntry, shipped


def model_fields(entry: CatalogEntry) -> dict[str, Any]:
    """A catalogue entry as ModelSpec's fields."""
    return {
        "key": entry.key,
        "name": entry.name,
        "hf_id": entry.hf_id,
        "aliases": list(entry.aliases),
        "family": entry.family,
        "params_total": entry.params_total,
        "params_active": entry.params_active,
        "weight_bytes": entry.weight_bytes,
        "config": entry.config,
        "sources": list(entry.sources),
    }


def seed_shipped(model_spec: Any) -> int:
    """Add the shipped models missing from `model_spec` (the model class, or a migration's
    historical one); returns how many were added."""
    present = set(model_spec.objects.values_list("key", flat=True))
    missing = [model_spec(**model_fields(e), source="shipped") for e in shipped() if e.key not in present]
    model_spec.objects.bulk_create(missing)
    return len(missing)
