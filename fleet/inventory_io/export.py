"""Writing the inventory as YAML or CSV, in the format the importer reads.

Output is deterministic: kinds in a fixed order, objects sorted by natural key, fields
in model order, so exporting twice gives the same text and diffs stay small.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import yaml
from django.db import models

from core.spreadsheet_cells import formula_safe
from fleet.inventory_io.records import CSV_COLUMNS, KINDS, PLURALS, csv_columns, to_record
from fleet.models import Gateway, Gpu, GpuHost, Instance


def export_inventory(*, fmt: str) -> str:
    """The whole inventory as `fmt` (yaml or csv) text."""
    records = {kind: [to_record(obj) for obj in objects] for kind, objects in _objects().items()}
    if fmt == "yaml":
        return _yaml(records)
    if fmt == "csv":
        return _csv(records)
    raise ValueError(f"Unknown format {fmt!r}; use yaml or csv.")


def _objects() -> dict[str, models.QuerySet]:
    return {
        "host": GpuHost.objects.order_by("name"),
        "gpu": Gpu.objects.select_related("host").order_by("host__name", "index"),
        "instance": Instance.objects.select_related("host").prefetch_related("gpus").order_by("name"),
        "gateway": Gateway.objects.prefetch_related("instances").order_by("name"),
    }


class _Dumper(yaml.SafeDumper):
    """Short lists of scalars (tags, GPU indexes) on one line: `gpus: [0, 1]`."""


def _represent_list(dumper: yaml.SafeDumper, data: list) -> yaml.SequenceNode:
    flat = all(not isinstance(item, dict | list) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat)


_Dumper.add_representer(list, _represent_list)


def _yaml(records: dict[str, list[dict[str, Any]]]) -> str:
    document = {plural: records[kind] for plural, kind in PLURALS.items()}
    return yaml.dump(
        document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
    )


def _csv(records: dict[str, list[dict[str, Any]]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for kind in KINDS:
        fields = csv_columns(kind)
        for record in records[kind]:
            cells = {column: _cell(record[name]) for column, name in fields.items()}
            writer.writerow([kind, *(cells.get(column, "") for column in CSV_COLUMNS[1:])])
    return out.getvalue()


def _cell(value: Any) -> str:
    """A CSV cell; text a spreadsheet would run as a formula (extra args start with "-",
    notes may start with "=") gets a leading apostrophe, which the import takes off again."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return formula_safe(";".join(str(item) for item in value))
    return value if isinstance(value, int | float) else formula_safe(str(value))
