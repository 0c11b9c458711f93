"""Planning an import: parse the text, check every record, and say what applying would do.

Nothing is written: the records are staged inside a transaction that is rolled back.
All errors are collected, each with its line, so one pass shows everything to fix. A text
holding characters no inventory may hold (control characters, NUL) is refused before parsing.
"""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext

from fleet import sharing
from fleet.inventory_io.characters import character_errors
from fleet.inventory_io.outcome import ImportError_, ImportPlan, PlannedChange
from fleet.inventory_io.parse_csv import parse_csv
from fleet.inventory_io.parse_yaml import parse_yaml
from fleet.inventory_io.records import KIND_NOUNS, Record
from fleet.inventory_io.staging import stage_records
from fleet.models import Instance

MAX_BYTES = 5 * 1024 * 1024
# Objects in one file: a file at the size limit, written as exported, holds about 20,000, and
# planning checks each against the database (a couple of milliseconds each).
MAX_RECORDS = 20_000
MAX_ERRORS = 200  # errors listed; one more says how many were left out
FORMATS = ("yaml", "csv")
_EXTENSIONS = {".yaml": "yaml", ".yml": "yaml", ".csv": "csv"}


def detect_format(filename: str) -> str:
    """The format a file name's extension implies; raises ValueError when it implies none."""
    for extension, fmt in _EXTENSIONS.items():
        if filename.lower().endswith(extension):
            return fmt
    raise ValueError(
        gettext("Cannot tell the format of %(name)s: name it .yaml, .yml or .csv.") % {"name": repr(filename)}
    )


def plan_import(*, text: str, fmt: str) -> ImportPlan:
    """Check `text` (in `fmt`, yaml or csv) against the database and list the changes."""
    if fmt not in FORMATS:
        raise ValueError(f"Unknown format {fmt!r}; use yaml or csv.")
    text = text.removeprefix("\ufeff")
    unreadable = _unreadable(text)
    if unreadable:
        return ImportPlan(errors=unreadable)
    records, errors = _parse(text, fmt)
    if len(records) > MAX_RECORDS:
        return ImportPlan(errors=_capped([_too_many(records), *errors]))
    records, duplicates = _without_duplicates(records)
    with transaction.atomic():
        staged = stage_records(records=records, log=None)
        warnings = _sharing_warnings(staged.changes)  # read while the staged rows exist
        transaction.set_rollback(True)
    all_errors = sorted(errors + duplicates + staged.errors, key=lambda e: e.line or 0)
    return ImportPlan(errors=_capped(all_errors), changes=staged.changes, records=records, warnings=warnings)


def _unreadable(text: str) -> list[ImportError_]:
    """Why the text is refused before parsing: too large, or holding characters no inventory may."""
    size = len(text.encode(errors="surrogatepass"))
    if size > MAX_BYTES:
        message = gettext("The input is %(size).1f MB; the limit is %(limit)d MB.")
        return [ImportError_(message % {"size": size / 2**20, "limit": MAX_BYTES // 2**20})]
    return character_errors(text)


def _too_many(records: list[Record]) -> ImportError_:
    message = gettext("The file holds %(count)s objects; import at most %(limit)s at a time.")
    values = {"count": f"{len(records):,}", "limit": f"{MAX_RECORDS:,}"}
    return ImportError_(message % values, line=records[MAX_RECORDS].line)


def _capped(errors: list[ImportError_]) -> list[ImportError_]:
    """The first MAX_ERRORS errors, and one saying how many more there are."""
    if len(errors) <= MAX_ERRORS:
        return errors
    more = gettext("%(count)s more errors after this line.") % {"count": f"{len(errors) - MAX_ERRORS:,}"}
    return [*errors[:MAX_ERRORS], ImportError_(more, line=errors[MAX_ERRORS - 1].line)]


def _sharing_warnings(changes: list[PlannedChange]) -> list[ImportError_]:
    """Instances the file creates or changes that would share a base URL or a GPU with
    another instance: allowed (it may be on purpose), but said before applying."""
    lines = {c.key: c.line for c in changes if c.kind == "instance" and c.action != "unchanged"}
    instances = sorted(Instance.objects.filter(name__in=lines), key=lambda i: lines[i.name] or 0)
    shared = sharing.sharing_by_instance(instances)
    return [
        ImportError_(message, line=lines[i.name], kind="instance", key=i.name, field=name)
        for i in instances
        for name, messages in sharing.conflict_messages(shared[i.pk]).items()
        for message in messages
    ]


def _parse(text: str, fmt: str) -> tuple[list[Record], list[ImportError_]]:
    if fmt == "csv":
        return parse_csv(text=text)
    return parse_yaml(text=text)


def _without_duplicates(records: list[Record]) -> tuple[list[Record], list[ImportError_]]:
    first_line: dict[tuple[str, str], int | None] = {}
    kept: list[Record] = []
    errors: list[ImportError_] = []
    for record in records:
        natural = (record.kind, record.key)
        if natural in first_line:
            errors.append(
                ImportError_(
                    gettext("Duplicate %(kind)s (first given on line %(line)s).")
                    % {"kind": KIND_NOUNS[record.kind], "line": first_line[natural]},
                    line=record.line,
                    kind=record.kind,
                    key=record.key,
                )
            )
            continue
        first_line[natural] = record.line
        kept.append(record)
    return kept, errors
