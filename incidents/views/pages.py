"""Incident pages: the list with filters and pages (drills hidden unless asked for), the
incident with its timeline, notes, status, acknowledgement, attachments and the probe charts
of the affected instances around its time; opening one by hand, editing it (every change kept
in the timeline), acknowledging it (also from a notification's link: a confirm page, since
following a link must change nothing), the Markdown postmortem."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.htmx import wants_partial
from core.i18n import later
from core.roles import Role, has_role, role_required
from diagnostics.models import SavedWalkthrough, TriageRun
from fleet import charts
from incidents import lifecycle, notes, words
from incidents.forms import IncidentForm, NoteForm
from incidents.models import Incident, Severity, Source, Status, TimelineEntry
from incidents.postmortem import postmortem

PAGE_SIZE = 25
FILTERS = ("status", "severity", "category")
ALL_SOURCES = "all"  # as a `source`: drills included
NOT_ACKNOWLEDGED = "no"  # as `acknowledged`: unresolved incidents nobody has acknowledged


@require_GET
@role_required(Role.VIEWER)
def index(request: HttpRequest) -> HttpResponse:
    incidents = Incident.objects.prefetch_related("instances")
    chosen = {name: request.GET.get(name, "") for name in (*FILTERS, "source", "acknowledged")}
    for name in FILTERS:
        if chosen[name]:
            incidents = incidents.filter(**{name: chosen[name]})
    incidents = _by_source(incidents, chosen["source"])
    if chosen["acknowledged"] == NOT_ACKNOWLEDGED:
        incidents = incidents.unresolved().filter(acknowledged_at__isnull=True)
    page = Paginator(incidents, PAGE_SIZE).get_page(request.GET.get("page"))
    now = timezone.now()
    context = {
        "page": page,
        "rows": [(incident, _open_for(incident, now)) for incident in page],
        "chosen": chosen,
        "statuses": Status.choices,
        "severities": Severity.choices,
        "sources": [(ALL_SOURCES, _("any source, drills too")), *Source.choices],
    }
    return render(request, "incidents/index.html", context)


def _by_source(incidents: QuerySet[Incident], source: str) -> QuerySet[Incident]:
    """Drills are practice: left out unless asked for by name or with `all`."""
    if source == ALL_SOURCES:
        return incidents
    if source in Source.values:
        return incidents.filter(source=source)
    return incidents.exclude(source=Source.DRILL)


def _open_for(incident: Incident, now: datetime) -> timedelta | None:
    """How long an unresolved incident has been open since it started; None once resolved."""
    return None if incident.status == Status.RESOLVED else now - incident.started_at


def _get_incident(pk: int) -> Incident:
    return get_object_or_404(
        Incident.objects.select_related("owner").prefetch_related("instances__host", "hosts", "timeline"),
        pk=pk,
    )


@require_GET
@role_required(Role.VIEWER)
def detail(request: HttpRequest, pk: int) -> HttpResponse:
    incident = _get_incident(pk)
    entries = [
        (entry, notes.render(entry.text) if entry.kind == TimelineEntry.Kind.NOTE else "")
        for entry in incident.timeline.all()
    ]
    since = incident.started_at - timedelta(minutes=30)
    instance_charts = [
        (instance, charts.instance_panels(instance=instance, since=since))
        for instance in incident.instances.all()[:3]
    ]
    context = _acknowledgement(request, incident) | {
        "entries": entries,
        "instance_charts": instance_charts,
        "note_form": NoteForm(),
        "statuses": Status.choices,
        "walkthroughs": SavedWalkthrough.objects.all()[:20],
        "triage_runs": TriageRun.objects.filter(status=TriageRun.Status.DONE)[:20],
    }
    return render(request, "incidents/detail.html", context)


@require_http_methods(["GET", "POST"])
@role_required(Role.SRE)
def create(request: HttpRequest) -> HttpResponse:
    form = IncidentForm(
        request.POST or None, initial={"started_at": timezone.now(), "detected_at": timezone.now()}
    )
    if request.method == "POST" and form.is_valid():
        incident = lifecycle.open_by_hand(form=form, at=timezone.now(), author=request.user.get_username())
        return redirect(incident)
    return render(request, "incidents/form.html", {"form": form}, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@role_required(Role.SRE)
def edit(request: HttpRequest, pk: int) -> HttpResponse:
    incident = _get_incident(pk)
    form = IncidentForm(request.POST or None, instance=incident)
    if request.method == "POST" and form.is_valid():
        saved = lifecycle.edit_by_hand(
            form=form, at=timezone.now(), author=request.user.get_username(), shown=_shown
        )
        return redirect(saved)
    return render(
        request,
        "incidents/form.html",
        {"form": form, "incident": incident},
        status=400 if form.errors else 200,
    )


def _shown(value) -> str:  # noqa: ANN001
    if hasattr(value, "all"):
        return ", ".join(str(v) for v in value.all()) or "—"
    return str(value) if value not in (None, "") else "—"


@require_POST
@role_required(Role.SRE)
def add_note(request: HttpRequest, pk: int) -> HttpResponse:
    incident = _get_incident(pk)
    form = NoteForm(request.POST)
    if form.is_valid():
        TimelineEntry.objects.create(
            incident=incident,
            kind=TimelineEntry.Kind.NOTE,
            text=form.cleaned_data["text"],
            author=request.user.get_username(),
        )
    return redirect(incident)


@require_POST
@role_required(Role.SRE)
def set_status(request: HttpRequest, pk: int) -> HttpResponse:
    incident = _get_incident(pk)
    status = request.POST.get("status", "")
    if status in Status.values:
        lifecycle.set_status(incident, status=status, at=timezone.now(), user=request.user.get_username())
    return redirect(incident)


@require_http_methods(["GET", "POST"])
@role_required(Role.SRE)
def acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: a confirm page with one button (what a notification links to; following a link
    changes nothing). POST: acknowledge, then back to the incident, or the page's partial."""
    incident = _get_incident(pk)
    if request.method == "GET":
        return render(request, "incidents/acknowledge.html", _acknowledgement(request, incident))
    error = ""
    try:
        lifecycle.acknowledge(incident, at=timezone.now(), user=request.user.get_username())
    except ValueError as exc:
        error = str(exc)
    if wants_partial(request, "acknowledgement"):
        context = _acknowledgement(request, _get_incident(pk), error=error)
        return render(request, "incidents/_acknowledgement.html", context)
    if error:
        messages.error(request, error)
    return redirect(incident)


def _acknowledgement(request: HttpRequest, incident: Incident, *, error: str = "") -> dict:
    """What the acknowledgement partial and the confirm page show."""
    return {
        "incident": incident,
        "acknowledged_by": lifecycle.acknowledged_by(incident),
        "open_for": _open_for(incident, timezone.now()),
        "can_edit": has_role(request.user, Role.SRE),
        "error": error,
    }


@require_POST
@role_required(Role.SRE)
def attach(request: HttpRequest, pk: int) -> HttpResponse:
    """Attach a saved walkthrough or a triage result to the timeline, as it was."""
    incident = _get_incident(pk)
    user = request.user.get_username()
    if walkthrough_id := request.POST.get("walkthrough"):
        item = get_object_or_404(SavedWalkthrough, pk=walkthrough_id)
        TimelineEntry.objects.create(
            incident=incident, kind=TimelineEntry.Kind.WALKTHROUGH, text=item.title, author=user,
            data={"walkthrough": item.pk, "steps": item.steps, "outcome": item.outcome},
        )  # fmt: skip
    elif run_id := request.POST.get("triage"):
        run = get_object_or_404(TriageRun, pk=run_id, status=TriageRun.Status.DONE)
        result = run.result or {}
        found = words.category(result["category"]) if result.get("category") else later("no known failure")
        TimelineEntry.objects.create(
            incident=incident, kind=TimelineEntry.Kind.TRIAGE, author=user,
            data={"triage": run.pk, "category": result.get("category"), "cause": result.get("root_cause")},
            **lifecycle.entry_text(later("%(file)s: %(found)s", file=run.filename, found=found)),
        )  # fmt: skip
    return redirect(incident)


@require_GET
@role_required(Role.VIEWER)
def export_postmortem(request: HttpRequest, pk: int) -> HttpResponse:
    incident = _get_incident(pk)
    response = HttpResponse(postmortem(incident), content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="incident-{incident.pk}-postmortem.md"'
    return response
