"""Reading the YAML inventory format into records that remember their line numbers.

The file is a mapping of `hosts`, `gpus`, `instances` and `gateways`, each a list of
mappings. Lines come from the composer's nodes, so every record and key can be located.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from django.utils.translation import gettext

from fleet.inventory_io.outcome import ImportError_
from fleet.inventory_io.records import FIELDS, KIND_NOUNS, PLURALS, Record

_SECTIONS = ", ".join(PLURALS)


class LineMapping(dict):
    """A YAML mapping plus the line it starts on and the line of each key."""

    def __init__(self, items: dict, *, line: int, key_lines: dict[Any, int]) -> None:
        super().__init__(items)
        self.line = line
        self.key_lines = key_lines


class _LineLoader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.problems: list[ImportError_] = []


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineMapping:
    loader.flatten_mapping(node)
    items: dict[Any, Any] = {}
    key_lines: dict[Any, int] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                None, None, "found a key that is not a scalar", key_node.start_mark
            )
        line = key_node.start_mark.line + 1
        if key in key_lines:
            message = gettext("Duplicate key (first given on line %(line)s).") % {"line": key_lines[key]}
            loader.problems.append(ImportError_(message, line=line, field=str(key)))
        items[key] = loader.construct_object(value_node, deep=True)
        key_lines[key] = line
    return LineMapping(items, line=node.start_mark.line + 1, key_lines=key_lines)


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(*, text: str) -> tuple[list[Record], list[ImportError_]]:
    """Records in file order, and every structural problem found on the way."""
    loader = _LineLoader(text)
    try:
        document = loader.get_single_data()
    except yaml.YAMLError as exc:
        return [], [_syntax_error(exc)]
    finally:
        loader.dispose()
    records, errors = _document_records(document)
    return records, loader.problems + errors


def _syntax_error(exc: yaml.YAMLError) -> ImportError_:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return ImportError_(
        gettext("Malformed YAML: %(problem)s.") % {"problem": problem}, line=mark.line + 1 if mark else None
    )


def _document_records(document: Any) -> tuple[list[Record], list[ImportError_]]:
    if document is None:
        return [], []
    if not isinstance(document, LineMapping):
        return [], [
            ImportError_(
                gettext("The file must be a mapping of %(sections)s.") % {"sections": _SECTIONS}, line=1
            )
        ]
    records: list[Record] = []
    errors: list[ImportError_] = []
    for section, items in document.items():
        line = document.key_lines[section]
        if section not in PLURALS:
            message = gettext("Unknown section; use %(sections)s.") % {"sections": _SECTIONS}
            errors.append(ImportError_(message, line=line, field=str(section)))
            continue
        _read_section(PLURALS[section], items, line, records, errors)
    return records, errors


def _read_section(
    kind: str, items: Any, line: int, records: list[Record], errors: list[ImportError_]
) -> None:
    if items is None:
        return
    if not isinstance(items, list):
        errors.append(ImportError_(gettext("Give a list of mappings."), line=line, field=f"{kind}s"))
        return
    for number, item in enumerate(items, start=1):
        if not isinstance(item, LineMapping):
            message = gettext("Item %(number)d is not a mapping.") % {"number": number}
            errors.append(ImportError_(message, line=line, field=f"{kind}s"))
            continue
        records.append(_record(kind, item, errors))


def _record(kind: str, item: LineMapping, errors: list[ImportError_]) -> Record:
    record = Record(kind=kind, line=item.line)
    for name, value in item.items():
        if name in FIELDS[kind]:
            record.values[name] = value
    for name in item:
        if name not in FIELDS[kind]:
            errors.append(
                ImportError_(
                    gettext("Unknown field for a %(kind)s.") % {"kind": KIND_NOUNS[kind]},
                    line=item.key_lines[name],
                    kind=kind,
                    key=record.key,
                    field=str(name),
                )
            )
    return record
