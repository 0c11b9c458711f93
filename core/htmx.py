"""The one place that decides whether a request gets a page or a partial."""

from __future__ import annotations

from django.http import HttpRequest


def wants_partial(request: HttpRequest, target: str | None = None) -> bool:
    """True for an htmx request (not a boosted navigation), aimed at `target` when given."""
    htmx = getattr(request, "htmx", None)
    if not htmx or htmx.boosted:
        return False
    return target is None or htmx.target == target
