"""Copy the shipped model catalogue into the database: models it lacks are added, models
already there (perhaps edited in the admin) are left alone."""

from __future__ import annotations

from typing import Any

from diagnostics.sizing.catalog import shipped


def seed_shipped(model_spec: Any) -> int:
    """Add the shipped models missing from `model_spec` (the model class, or a migration's
    historical one); returns how many were added."""
    present = set(model_spec.objects.values_list("key", flat=True))
    missing = [
        model_spec(
            key=e.key,
            name=e.name,
            hf_id=e.hf_id,
            aliases=list(e.aliases),
            family=e.family,
            params_total=e.params_total,
            params_active=e.params_active,
            weight_bytes=e.weight_bytes,
            config=e.config,
            sources=list(e.sources),
            source="shipped",
        )
        for e in shipped()
        if e.key not in present
    ]
    model_spec.objects.bulk_create(missing)
    return len(missing)
