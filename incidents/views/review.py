"""The review for team leads: filters in the URL, charts and a table of figures, and the same
incidents as CSV. The statistics themselves are incidents.stats."""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core import figures
from core.roles import Role, role_required
from fleet.models import GpuHost, Instance
from incidents import words
from incidents.models import CATEGORY_CHOICES, Severity, Status
from incidents.stats import (
    ALL_TIME,
    CSV_COLUMNS,
    DEFAULT_SINCE,
    FAMILIES,
    SHORTCUTS,
    ReviewFilters,
    csv_row,
    load_records,
    parse_moment,
    review_figures,
)

ANY = [("", _("any"))]


def _text(datalist: str | None, placeholder: str) -> forms.TextInput:
    attrs = {"placeholder": placeholder, "autocomplete": "off"}
    return forms.TextInput(attrs | {"list": datalist} if datalist else attrs)


class ReviewFilterForm(forms.Form):
    since = forms.CharField(
        required=False, label=_("Since"), widget=_text("since-shortcuts", _("30d, 2w or 2025-01-31"))
    )
    until = forms.CharField(required=False, label=_("Until"), widget=_text(None, _("now, or 2025-01-31")))
    family = forms.ChoiceField(
        required=False,
        label=_("Family"),
        choices=ANY + [(key, words.FAMILIES.get(key, key)) for key in FAMILIES],
    )
    category = forms.ChoiceField(required=False, label=_("Category"), choices=ANY + CATEGORY_CHOICES)
    severity = forms.ChoiceField(required=False, label=_("Severity"), choices=ANY + Severity.choices)
    status = forms.ChoiceField(required=False, label=_("Status"), choices=ANY + Status.choices)
    host = forms.CharField(
        required=False, label=_("Host"), max_length=63, widget=_text("host-names", _("any"))
    )
    instance = forms.CharField(
        required=False, label=_("Instance"), max_length=63, widget=_text("instance-names", _("any"))
    )
    model = forms.CharField(
        required=False, label=_("Model"), max_length=200, widget=_text("model-names", _("any"))
    )

    def __init__(self, *args: Any, now: datetime | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = now or timezone.now()

    def clean_since(self) -> datetime | None:
        return self._moment("since", end_of_day=False)

    def clean_until(self) -> datetime | None:
        return self._moment("until", end_of_day=True)

    def _moment(self, name: str, *, end_of_day: bool) -> datetime | None:
        value = self.cleaned_data[name]
        if not value or value == ALL_TIME:
            return None
        try:
            return parse_moment(value, now=self.now, end_of_day=end_of_day)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and until <= since:
            self.add_error("until", gettext("Until must come after since."))
        return cleaned

    def to_filters(self) -> ReviewFilters:
        return ReviewFilters(**self.cleaned_data)


def _filter_form(request: HttpRequest) -> ReviewFilterForm:
    """The form bound to the URL's filters; no `since` at all (a first visit) means the last 30
    days, a blank one means all time."""
    data: QueryDict = request.GET.copy()
    data.setdefault("since", DEFAULT_SINCE)
    return ReviewFilterForm(data)


@role_required(Role.VIEWER)
def review(request: HttpRequest) -> HttpResponse:
    form = _filter_form(request)
    stats = review_figures(load_records(filters=form.to_filters())) if form.is_valid() else None
    context = {
        "form": form,
        "shortcuts": SHORTCUTS,
        "suggestions": _suggestions(),
        "figures": stats,
        "family_rows": _family_rows(stats) if stats else [],
        "category_rows": _with_fraction(stats["categories"]) if stats else [],
        "charts": _charts(stats) if stats and stats["total"] else [],
    }
    return render(request, "incidents/review.html", context)


@role_required(Role.VIEWER)
def review_csv(request: HttpRequest) -> HttpResponse:
    form = _filter_form(request)
    if not form.is_valid():
        errors = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in form.errors.items())
        return HttpResponseBadRequest(errors, content_type="text/plain; charset=utf-8")
    filters = form.to_filters()
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_csv_filename(filters)}"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    writer.writerows(csv_row(record) for record in load_records(filters=filters))
    return response


def _suggestions() -> dict[str, list[str]]:
    """Names for the host, instance and model fields' datalists."""
    return {
        "host-names": list(GpuHost.objects.order_by("name").values_list("name", flat=True)),
        "instance-names": list(Instance.objects.order_by("name").values_list("name", flat=True)),
        "model-names": sorted(set(Instance.objects.values_list("served_model_name", flat=True))),
    }


def _csv_filename(filters: ReviewFilters) -> str:
    start = f"{timezone.localtime(filters.since):%Y-%m-%d}" if filters.since else "all"
    # until is exclusive (a date counts whole, so it is the next midnight): name the last day in
    end = timezone.localtime(filters.until - timedelta(microseconds=1) if filters.until else timezone.now())
    return f"incidents-{start}-to-{end:%Y-%m-%d}.csv"


def _family_rows(stats: dict[str, Any]) -> list[dict[str, Any]]:
    """Each family's share beside its response times (both lists are in the same order)."""
    return [
        share | {"mtta": times["mtta"], "mttr": times["mttr"]}
        for share, times in zip(
            _with_fraction(stats["families"]), stats["response"]["by_family"], strict=True
        )
    ]


def _with_fraction(shares: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Shares with their fraction beside the percentage, for the `percent` filter."""
    return [share | {"fraction": share["percent"] / 100} for share in shares]


# Charts: plotly figures embedded as JSON and drawn by ops_console/charts.js -----------------


def _figure(traces: list, **layout: Any) -> dict:
    base = {"height": 300, "margin": {"l": 50, "r": 10, "t": 10, "b": 40}, "legend": {"orientation": "h"}}
    return figures.figure(traces, **(base | layout))


def _charts(stats: dict[str, Any]) -> list[dict[str, Any]]:
    charts = [
        ("families", gettext("Share by family"), _family_pie(stats["families"])),
        ("response", gettext("MTTA and MTTR by family (mean, minutes)"), _response_bars(stats["response"])),
        ("weekly-count", gettext("Incidents per week"), _weekly_counts(stats["weeks"])),
        (
            "weekly-response",
            gettext("MTTA and MTTR per week (mean, minutes)"),
            _weekly_response(stats["weeks"]),
        ),
    ]
    if stats["top_instances"]:
        charts.append(
            (
                "instances",
                gettext("Instances with the most incidents"),
                _instance_bars(stats["top_instances"]),
            )
        )
    return [
        {"id": key, "title": title, "figure_id": f"{key}-figure", "figure": figure}
        for key, title, figure in charts
    ]


def _family_pie(families: list[dict]) -> dict:
    labels, counts = [words.family(f["key"]) for f in families], [f["count"] for f in families]
    return _figure([figures.pie(labels=labels, values=counts, sort=False, hole=0.4)])


def _response_bars(response: dict) -> dict:
    names = [words.family(item["key"]) for item in response["by_family"]]
    traces = [
        figures.bar(name=_mean(which), x=names, y=[item[which]["mean"] for item in response["by_family"]])
        for which in ("mtta", "mttr")
    ]
    return _figure(traces, barmode="group", yaxis=figures.axis(gettext("minutes")))


def _mean(which: str) -> str:
    """A trace's name: "MTTA mean", "MTTR mean"."""
    return gettext("%(measure)s mean") % {"measure": which.upper()}


def _weekly_counts(weeks: list[dict]) -> dict:
    trace = figures.scatter(
        x=[w["week"] for w in weeks], y=[w["incidents"] for w in weeks], mode="lines+markers"
    )
    return _figure([trace], yaxis=figures.axis(gettext("incidents"), rangemode="tozero"))


def _weekly_response(weeks: list[dict]) -> dict:
    traces = [
        figures.scatter(
            name=_mean(which),
            x=[w["week"] for w in weeks],
            y=[w[which]["mean"] for w in weeks],
            mode="lines+markers",
        )
        for which in ("mtta", "mttr")
    ]
    return _figure(traces, yaxis=figures.axis(gettext("minutes"), rangemode="tozero"))


def _instance_bars(top: list[dict]) -> dict:
    top = list(reversed(top))  # plotly draws the first bar at the bottom
    trace = figures.bar(x=[i["incidents"] for i in top], y=[i["instance"] for i in top], orientation="h")
    return _figure(
        [trace], margin={"l": 140, "r": 10, "t": 10, "b": 40}, xaxis=figures.axis(gettext("incidents"))
    )
