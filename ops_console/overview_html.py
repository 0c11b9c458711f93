"""The overview's repeated pieces as HTML built in Python: the problem hosts' groups with
their tiles, the healthy hosts' chips, the capacity findings and the state filter's links.

A page shows a few dozen tiles and up to a few hundred chips; an include per tile and a
template loop per chip cost more than the rest of the answer together (docs/fleet-overview.md,
"How it renders"). The markup is the templates' own: the ids, classes and data-* attributes
that htmx (hx-swap-oob), overview.js, overview.css and the tests read. The words are looked
up once per answer (Words), and every value is escaped here; only the reason, already HTML
(fleet.probes.evidence), goes in as it is."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, ngettext

from fleet.shown_state import state_label
from ops_console.overview_layout import Chip, Group, Note, Overview, Tile


class Words:
    """What the pieces say, in the active language, looked up once per answer. The msgids
    are the templates' ({% blocktranslate %} ones: their values are escaped, the words not)."""

    def __init__(self) -> None:
        self.capacity = gettext("capacity: %(title)s")
        self.probed = gettext("probed %(since)s ago")
        self.show_all = escape(gettext("show every instance of this host"))
        self._quiet: dict[int, str] = {}

    def quiet(self, count: int) -> str:
        found = self._quiet.get(count)
        if found is None:
            found = self._quiet[count] = ngettext("%(count)s more, up", "%(count)s more, all up", count) % {
                "count": count
            }
        return found


CURRENT = ' aria-current="true"'


def _oob(oob: bool) -> str:
    return ' hx-swap-oob="true"' if oob else ""


def tile(item: Tile, words: Words, *, oob: bool = False) -> SafeString:
    """An instance's tile: its name, shown state, engine and model, and what it has to say."""
    shown = escape(item.shown)
    name = escape(item.name)
    parts = [
        f'<a class="tile verdict-{shown}" id="tile-{item.pk}" href="{escape(item.url)}" '
        f'data-instance="{name}" data-state="{shown}"{_oob(oob)}>',
        f'<span class="tile-head"><strong>{name}</strong> <span class="badge verdict-{shown}">'
        f"{escape(item.label)}</span></span>",
        f'<span class="muted" translate="no">{escape(item.about)}</span>',
    ]
    if item.reason_html:
        parts.append(f'<span class="reason">{conditional_escape(item.reason_html)}</span>')
    if item.capacity_title:
        said = words.capacity % {"title": escape(item.capacity_title)}
        parts.append(f'<span class="reason capacity severity-{escape(item.capacity_severity)}">{said}</span>')
    if item.probed_since:
        said = words.probed % {"since": escape(item.probed_since)}
        parts.append(f'<span class="muted small">{said}</span>')
    parts.append("</a>")
    return mark_safe("\n".join(parts))  # noqa: S308 (every value escaped above)


def group(item: Group, words: Words, *, oob: bool = False) -> SafeString:
    """A host with something to say: its name and place, its condition when that is news,
    its tiles and the link to its quiet others."""
    url = escape(item.url)
    head = [
        f'<a href="{url}">{escape(item.name)}</a> '
        f'<span class="muted" translate="no">{escape(item.place)}</span>'
    ]
    if item.badge:
        badge = item.badge
        colour = "verdict-degraded" if badge.host_up else "verdict-down"
        head.append(
            f'<a class="badge host-condition {colour}" data-condition="{escape(badge.condition)}" '
            f'href="{url}#agent" title="{escape(badge.title)}">{escape(badge.label)}</a>'
        )
    tiles = [tile(t, words) for t in item.tiles]
    if item.quiet:
        tiles.append(
            f'<a class="tile quiet-others" href="{escape(item.expand_url)}" data-quiet="{item.quiet}">'
            f"<strong>{escape(words.quiet(item.quiet))}</strong> "
            f'<span class="muted small">{words.show_all}</span></a>'
        )
    return mark_safe(  # noqa: S308 (every value escaped above)
        f'<section class="host-group" id="group-{item.pk}" data-host="{escape(item.name)}"{_oob(oob)}>\n'
        f"<h3>{' '.join(head)}</h3>\n"
        f'<div class="tiles">\n{chr(10).join(tiles)}\n</div>\n</section>'
    )


def groups(items: Iterable[Group], words: Words) -> SafeString:
    return mark_safe("\n".join(group(g, words) for g in items))  # noqa: S308 (built escaped)


def chips(items: Iterable[Chip]) -> SafeString:
    """The healthy hosts, each a link to its tiles with its count."""
    return mark_safe(  # noqa: S308 (every value escaped here)
        "\n".join(
            f'<li><a class="host-chip" href="{escape(c.url)}" data-host="{escape(c.name)}">'
            f'{escape(c.name)} <span class="count">{c.count}</span></a></li>'
            for c in items
        )
    )


def notes(items: Iterable[Note]) -> SafeString:
    """The open capacity findings of note, each with its instance and since when."""
    since = gettext("since %(since)s")
    return mark_safe(  # noqa: S308 (every value escaped here)
        "\n".join(
            f'<li><span class="badge severity-{escape(n.severity)}">{escape(n.severity_label)}</span> '
            f'<a href="{escape(n.url)}#capacity">{escape(n.instance)}</a>: {escape(n.title)} '
            f'<span class="muted small">{since % {"since": escape(n.since)}}</span></li>'
            for n in items
        )
    )


def filters(overview: Overview) -> SafeString:
    """A link per shown state with the fleet's count, the chosen one marked current."""
    chosen = overview.filter.state
    links = []
    for state, url, count in overview.filters:
        current = CURRENT if state == chosen else ""
        links.append(
            f'<a href="{escape(url)}" hx-get="{escape(url)}" class="verdict-{state}"{current}>'
            f'{escape(state_label(state))} <span class="count" data-state="{state}">{count}</span></a>'
        )
    return mark_safe("\n".join(links))  # noqa: S308 (every value escaped here)
