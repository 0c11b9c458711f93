"""Reading the CSV inventory format: one file, a `kind` column, the union of all kinds' fields.

Lists (tags, nvlink_peers, gpus, instances) are `;`-separated; a gateway's own kind
(nginx, envoy, kong) is in the `gateway_kind` column. Line numbers are physical
lines, the header being line 1, so a row with a quoted multi-line cell keeps its first line.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from django.utils.translation import gettext

from core.spreadsheet_cells import formula_text
from fleet.inventory_io.outcome import ImportError_
from fleet.inventory_io.records import CSV_COLUMNS, KIND_NOUNS, KINDS, LIST_FIELDS, Record, csv_columns
from fleet.inventory_io.values import shown_value

_ALL_COLUMNS = frozenset(CSV_COLUMNS)
_KIND_LIST = ", ".join(KINDS)
Row = tuple[int, list[str]]


def parse_csv(*, text: str) -> tuple[list[Record], list[ImportError_]]:
    """Records in file order, and every structural problem found on the way."""
    errors: list[ImportError_] = []
    rows = list(_rows(text, errors))
    if not rows:
        return [], errors
    (header_line, header), body = rows[0], rows[1:]
    columns = [cell.strip() for cell in header]
    errors.extend(_header_errors(columns, header_line))
    records = [r for r in (_record(columns, row, errors) for row in body) if r is not None]
    return records, errors


def _rows(text: str, errors: list[ImportError_]) -> Iterator[Row]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    try:
        for cells in reader:
            if any(cell.strip() for cell in cells):
                yield start, cells
            start = reader.line_num + 1
    except csv.Error as exc:
        errors.append(ImportError_(gettext("Malformed CSV: %(error)s.") % {"error": exc}, line=start))


def _header_errors(columns: list[str], line: int) -> Iterator[ImportError_]:
    if "kind" not in columns:
        yield ImportError_(gettext("The header has no kind column."), line=line)
    seen: set[str] = set()
    for column in columns:
        if column in seen:
            yield ImportError_(gettext("Duplicate column."), line=line, field=column)
        elif column not in _ALL_COLUMNS:
            yield ImportError_(gettext("Unknown column."), line=line, field=column)
        seen.add(column)


def _record(columns: list[str], row: Row, errors: list[ImportError_]) -> Record | None:
    line, cells = row
    if len(cells) > len(columns):
        message = gettext("The row has %(cells)d cells but the header has %(columns)d.")
        errors.append(ImportError_(message % {"cells": len(cells), "columns": len(columns)}, line=line))
        return None
    cells = [cell.strip() for cell in cells] + [""] * (len(columns) - len(cells))
    by_column = dict(zip(columns, cells, strict=True))
    kind = by_column.get("kind", "").lower()
    if kind not in KINDS:
        message = gettext("Unknown kind %(kind)s; use %(kinds)s.")
        message %= {"kind": shown_value(kind), "kinds": _KIND_LIST}
        errors.append(ImportError_(message, line=line, field="kind"))
        return None
    return _fill(Record(kind=kind, line=line), by_column, errors)


def _fill(record: Record, by_column: dict[str, str], errors: list[ImportError_]) -> Record:
    own = csv_columns(record.kind)
    for column, cell in by_column.items():
        if column in own:
            record.values[own[column]] = _cell_value(own[column], cell)
    for column, cell in by_column.items():
        if cell and column not in own and column in _ALL_COLUMNS - {"kind"}:
            errors.append(
                ImportError_(
                    gettext("A %(kind)s has no such field.") % {"kind": KIND_NOUNS[record.kind]},
                    line=record.line,
                    kind=record.kind,
                    key=record.key,
                    field=column,
                )
            )
    return record


def _cell_value(column: str, cell: str) -> str | list[str] | None:
    cell = formula_text(cell)  # the export's guard against spreadsheets running it, taken off
    if not cell:
        return None
    if column in LIST_FIELDS:
        return [item.strip() for item in cell.split(";") if item.strip()]
    return cell
