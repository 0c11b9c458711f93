"""Applying a checked import plan, all or nothing, with every change logged."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from fleet.inventory_io.outcome import ImportError_, ImportPlan, ImportResult
from fleet.inventory_io.staging import ChangeLog, stage_records


class ImportFailed(ValueError):
    """The plan had errors, or the database changed since planning so that it now has."""

    def __init__(self, errors: list[ImportError_]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors) or "The import plan has errors.")


def apply_import(*, plan: ImportPlan, actor: Any, source: str) -> ImportResult:
    """Create and update what the plan lists, in one transaction; never deletes.

    The records are staged again inside the transaction, so an error that appears only
    now (someone edited the inventory meanwhile) undoes the whole import.
    """
    if plan.errors:
        raise ImportFailed(plan.errors)
    with transaction.atomic():
        staged = stage_records(records=plan.records, log=ChangeLog(actor=actor, source=source))
        if staged.errors:
            raise ImportFailed(staged.errors)
    return ImportResult(changes=staged.changes)
