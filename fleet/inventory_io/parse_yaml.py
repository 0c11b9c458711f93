"""Reading the YAML inventory format into records that remember their line numbers.

The file is a mapping of `hosts`, `gpus`, `instances` and `gateways`, each a list of
mappings. Lines come from the composer's nodes, so every record and key can be located.

Whatever the text, the reader ends with records or located errors: nesting is bounded (an
inventory nests four deep), so are the values a file holds, and so is what aliases repeat (a
"billion laughs" document, a few lines that expand to billions of values, is refused at the
alias that crosses the bound).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from django.utils.translation import gettext

from fleet.inventory_io.characters import unprintable_error
from fleet.inventory_io.outcome import ImportError_
from fleet.inventory_io.records import FIELDS, KIND_NOUNS, PLURALS, Record

_SECTIONS = ", ".join(PLURALS)
MAX_DEPTH = 32  # collections within collections; an inventory's own go four deep
MAX_ALIASED_NODES = 100_000  # nodes that aliases and merge keys may repeat, all together
MAX_NODES = 600_000  # values in all; a file at the size limit, written as exported, holds about 470,000


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
        self.depth = 0
        self.sizes: dict[int, int] = {}  # id(node) -> its nodes once its aliases are expanded
        self.aliased = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            self._count_alias(node, mark)
            return node
        if self.depth >= MAX_DEPTH:
            problem = gettext("collections nested more than %(limit)d deep") % {"limit": MAX_DEPTH}
            raise yaml.composer.ComposerError(None, None, problem, self.peek_event().start_mark)
        if len(self.sizes) >= MAX_NODES:
            problem = gettext("more than %(limit)s values; import the file in parts")
            problem %= {"limit": f"{MAX_NODES:,}"}
            raise yaml.composer.ComposerError(None, None, problem, self.peek_event().start_mark)
        self.depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        self.sizes[id(node)] = 1 + sum(self.sizes[id(child)] for child in _children(node))
        return node

    def _count_alias(self, node: yaml.Node, mark: yaml.Mark) -> None:
        size = self.sizes.get(id(node))
        if size is None:  # its anchor's node is still being composed: the alias is inside it
            problem = gettext("an alias inside the collection it refers to")
            raise yaml.composer.ComposerError(None, None, problem, mark)
        self.aliased += size
        if self.aliased > MAX_ALIASED_NODES:
            problem = gettext("aliases repeat more than %(limit)s values")
            problem %= {"limit": f"{MAX_ALIASED_NODES:,}"}
            raise yaml.composer.ComposerError(None, None, problem, mark)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """A value YAML's own constructors cannot make (a date like 2026-13-45, an integer of
        thousands of digits, `!!timestamp` on text that is none) is an error at its node, like
        any other."""
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, OverflowError) as exc:  # their words say what is wrong
            problem = gettext("cannot read the value: %(error)s") % {"error": exc}
        except Exception:  # noqa: BLE001  (whatever else PyYAML's constructors raise on such a value)
            problem = gettext("cannot read the value as %(tag)s") % {"tag": node.tag}
        raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return []


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineMapping:
    own = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)  # puts the pairs merged in (`<<: *anchor`) first
    merged = len(node.value) - own
    items: dict[Any, Any] = {}
    key_lines: dict[Any, int] = {}
    own_lines: dict[Any, int] = {}  # a key merged in may be given again, to override it
    for number, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                None, None, "found a key that is not a scalar", key_node.start_mark
            )
        line = key_node.start_mark.line + 1
        if number >= merged:
            if key in own_lines:
                message = gettext("Duplicate key (first given on line %(line)s).") % {"line": own_lines[key]}
                loader.problems.append(ImportError_(message, line=line, field=_key_shown(key)))
            own_lines[key] = line
        items[key] = loader.construct_object(value_node, deep=True)
        key_lines[key] = line
    return LineMapping(items, line=node.start_mark.line + 1, key_lines=key_lines)


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(*, text: str) -> tuple[list[Record], list[ImportError_]]:
    """Records in file order, and every structural problem found on the way."""
    loader = None
    try:
        loader = _LineLoader(text)  # the reader checks every character here
        document = loader.get_single_data()
    except yaml.YAMLError as exc:
        return [], [_syntax_error(exc, text)]
    finally:
        if loader is not None:
            loader.dispose()
    records, errors = _document_records(document)
    return records, loader.problems + errors


def _syntax_error(exc: yaml.YAMLError, text: str) -> ImportError_:
    if isinstance(exc, yaml.reader.ReaderError) and 0 <= exc.position < len(text):
        return unprintable_error(text, exc.position)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    if context and problem.startswith("but "):  # "expected a single document...; but found another"
        problem = f"{context}; {problem}"
    if mark is None:
        return ImportError_(gettext("Malformed YAML: %(problem)s.") % {"problem": problem})
    message = gettext("Malformed YAML at column %(column)d: %(problem)s.")
    return ImportError_(message % {"column": mark.column + 1, "problem": problem}, line=mark.line + 1)


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
            errors.append(ImportError_(message, line=line, field=_key_shown(section)))
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
                    field=_key_shown(name),
                )
            )
    return record


def _key_shown(key: Any) -> str:
    """A key as an error names it: cut short, as it may be any text at all."""
    text = str(key)
    return text if len(text) <= 60 else text[:59] + "…"
