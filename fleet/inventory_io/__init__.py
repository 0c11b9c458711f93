"""Inventory import and export as YAML or CSV.

text_of() reads an uploaded file's bytes as text; plan_import() checks a file and lists what
would change; apply_import() applies a plan in one transaction; export_inventory() writes the
inventory in the same formats.
"""

from fleet.inventory_io.apply import ImportFailed, apply_import
from fleet.inventory_io.characters import UnreadableFile, text_of
from fleet.inventory_io.export import export_inventory
from fleet.inventory_io.outcome import (
    ImportError_,
    ImportPlan,
    ImportResult,
    PlannedChange,
    counts_summary,
)
from fleet.inventory_io.plan import MAX_BYTES, detect_format, plan_import

__all__ = [
    "MAX_BYTES",
    "ImportError_",
    "ImportFailed",
    "ImportPlan",
    "ImportResult",
    "PlannedChange",
    "UnreadableFile",
    "apply_import",
    "counts_summary",
    "detect_format",
    "export_inventory",
    "plan_import",
    "text_of",
]
