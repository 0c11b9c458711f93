"""The overview's poll answers with what changed since the tab's last answer (issue 16).

What a tab shows is a tree of pieces, each with an HTML id: the counts, the maintenance
and capacity sections, the problem groups and their tiles, the healthy hosts' chips. Each
piece has a fingerprint of what it shows itself, its children's ids and order included but
not their contents; the version of the whole is a fingerprint of all of them. A page keeps
{id: fingerprint} in Django's cache under its version, and its poller sends that version:

  same version                nothing changed: 204, htmx swaps nothing
  an older one, still cached  the pieces whose own fingerprint changed (a changed group
                              brings its tiles along; an unchanged group only its changed
                              tiles), swapped by id (hx-swap-oob), with the counts and a
                              poller carrying the new version
  unknown (evicted, another   the whole partial, swapped by id
  process, another view)

The default cache is per process; with several processes a poll that lands on another one
finds no snapshot and gets the whole partial, which is always right."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache

SNAPSHOT_TTL_S = 15 * 60
CACHE_PREFIX = "fleet-overview:"


def fingerprint(*parts: Any) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Piece:
    """A part of the page with an id; `own` fingerprints what it shows itself."""

    id: str
    kind: str
    item: Any
    own: str
    children: tuple[Piece, ...] = ()

    def walk(self) -> Iterator[Piece]:
        yield self
        for child in self.children:
            yield from child.walk()


def snapshot(root: Piece) -> dict[str, str]:
    """{id: own fingerprint} of every piece."""
    return {piece.id: piece.own for piece in root.walk()}


def version_of(shown: dict[str, str]) -> str:
    return fingerprint(sorted(shown.items()))


def changed(root: Piece, before: dict[str, str]) -> list[Piece] | None:
    """The outermost pieces whose own fingerprint differs from `before`; None when the root
    does (another view: the whole partial is the answer)."""
    if before.get(root.id) != root.own:
        return None
    found: list[Piece] = []
    pending = list(root.children)
    while pending:
        piece = pending.pop(0)
        if before.get(piece.id) != piece.own:
            found.append(piece)
        else:
            pending[:0] = piece.children
    return found


def remember(version: str, shown: dict[str, str]) -> None:
    cache.set(CACHE_PREFIX + version, shown, SNAPSHOT_TTL_S)


def keep(version: str, shown: dict[str, str]) -> None:
    """Keep a snapshot that a tab still shows for another SNAPSHOT_TTL_S."""
    if not cache.touch(CACHE_PREFIX + version, SNAPSHOT_TTL_S):
        remember(version, shown)


def recall(version: str) -> dict[str, str] | None:
    return cache.get(CACHE_PREFIX + version) if version else None
