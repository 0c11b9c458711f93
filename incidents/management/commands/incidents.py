"""Incidents on the command line.

manage.py incidents report [--since 30d] [--until DATE] [--family F] [--category C]
    [--severity S] [--status S] [--host H] [--instance I] [--model M] [--json]

prints the review's figures, the same the review page shows (--json: the page's own dict);
drill incidents are left out, as on the page.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from incidents.models import CATEGORY_CHOICES, Severity, Status
from incidents.stats import (
    ALL_TIME,
    DEFAULT_SINCE,
    FAMILIES,
    ReviewFilters,
    load_records,
    parse_moment,
    review_figures,
)


class Command(BaseCommand):
    help = "Incident review figures: shares by family, MTTA and MTTR, weekly trend, top instances."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        report = actions.add_parser("report", help="Print the review's figures for a time range.")
        report.add_argument(
            "--since", default=DEFAULT_SINCE, help="7d, 30d, 90d, 2w, a date, a date and time, or all."
        )
        report.add_argument("--until", help="A date (counted whole) or a date and time; default now.")
        report.add_argument("--family", choices=FAMILIES)
        report.add_argument("--category", choices=[key for key, _ in CATEGORY_CHOICES], metavar="CATEGORY")
        report.add_argument("--severity", choices=Severity.values)
        report.add_argument("--status", choices=Status.values)
        report.add_argument("--host", help="A host's name.")
        report.add_argument("--instance", help="An instance's name.")
        report.add_argument("--model", help="A model name, as served or as recorded on the incident.")
        report.add_argument("--json", action="store_true", help="Print the figures as JSON.")

    def handle(self, *args, action: str, **options: Any) -> None:
        filters = _filters(options)
        figures = review_figures(load_records(filters=filters))
        if options["json"]:
            self.stdout.write(json.dumps(figures, indent=2))
        else:
            self.stdout.write("\n".join(text_report(figures, filters=filters)))


def _filters(options: dict[str, Any]) -> ReviewFilters:
    now = timezone.now()
    since = _moment("--since", options["since"], now=now, end_of_day=False)
    until = _moment("--until", options["until"], now=now, end_of_day=True)
    if since and until and until <= since:
        raise CommandError("--until must come after --since.")
    named = ("family", "category", "severity", "status", "host", "instance", "model")
    return ReviewFilters(since=since, until=until, **{name: options[name] or "" for name in named})


def _moment(flag: str, value: str | None, *, now: datetime, end_of_day: bool) -> datetime | None:
    if not value or value == ALL_TIME:
        return None
    try:
        return parse_moment(value, now=now, end_of_day=end_of_day)
    except ValueError as exc:
        raise CommandError(f"{flag}: {exc}") from None


def text_report(figures: dict[str, Any], *, filters: ReviewFilters) -> list[str]:
    """The figures as aligned text tables, one section after another."""
    status = ", ".join(f"{count} {name}" for name, count in figures["status"].items())
    lines = [f"Incidents started {_period(filters)}: {figures['total']} ({status})"]
    if figures["total"]:
        lines += _families(figures) + _categories(figures) + _weeks(figures) + _instances(figures)
        lines += ["", _response_counts(figures)]
        lines += ["Times in minutes, over the incidents that have both timestamps."]
    return lines


def _families(figures: dict[str, Any]) -> list[str]:
    lines = ["", _row("family", "incidents", "share", "MTTA mean", "median", "MTTR mean", "median")]
    for share, times in zip(figures["families"], figures["response"]["by_family"], strict=True):
        lines.append(_row(share["key"], share["count"], f"{share['percent']} %", *_times(times)))
    lines.append(_row("all", figures["total"], "100.0 %", *_times(figures["response"]["overall"])))
    return lines


def _categories(figures: dict[str, Any]) -> list[str]:
    rows = [_row(item["key"], item["count"], f"{item['percent']} %") for item in figures["categories"]]
    return ["", _row("category", "incidents", "share"), *rows]


def _weeks(figures: dict[str, Any]) -> list[str]:
    rows = [
        _row(week["week"], week["incidents"], _minutes(week["mtta"]["mean"]), _minutes(week["mttr"]["mean"]))
        for week in figures["weeks"]
    ]
    return ["", _row("week", "incidents", "MTTA mean", "MTTR mean"), *rows]


def _instances(figures: dict[str, Any]) -> list[str]:
    if not figures["top_instances"]:
        return []
    rows = [_row(item["instance"], item["incidents"]) for item in figures["top_instances"]]
    return ["", _row("instance", "incidents"), *rows]


def _response_counts(figures: dict[str, Any]) -> str:
    overall = figures["response"]["overall"]
    total = overall["incidents"]
    return (
        f"MTTA over {overall['mtta']['count']} of {total} incidents (acknowledged), "
        f"MTTR over {overall['mttr']['count']} of {total} (resolved). Drills are left out."
    )


def _times(times: dict[str, Any]) -> list[str]:
    return [_minutes(times[which][stat]) for which in ("mtta", "mttr") for stat in ("mean", "median")]


def _minutes(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _period(filters: ReviewFilters) -> str:
    parts = []
    if filters.since:
        parts.append(f"since {_when(filters.since)}")
    if filters.until:  # exclusive: an until date is the next midnight
        parts.append(f"before {_when(filters.until)}")
    return ", ".join(parts) or "at any time"


def _when(moment: datetime) -> str:
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M}"


def _row(first: object, *rest: object) -> str:
    return f"{first!s:<24}" + "".join(f"{value!s:>11}" for value in rest)
