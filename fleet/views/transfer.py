"""Inventory import (upload or paste, dry run first) and export pages."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from core.roles import Role, role_required
from fleet import inventory_io
from fleet.forms import ImportForm

CONTENT_TYPES = {"yaml": "application/yaml", "csv": "text/csv"}
_COUNTED = {"created": "create", "updated": "update", "unchanged": "unchanged"}


@require_GET
@role_required(Role.VIEWER)
def export_inventory(request: HttpRequest) -> HttpResponse:
    fmt = request.GET.get("format", "yaml")
    if fmt not in CONTENT_TYPES:
        return HttpResponse(_("format must be yaml or csv"), status=400, content_type="text/plain")
    response = HttpResponse(
        inventory_io.export_inventory(fmt=fmt), content_type=f"{CONTENT_TYPES[fmt]}; charset=utf-8"
    )
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response["Content-Disposition"] = f'attachment; filename="inventory-{stamp}.{fmt}"'
    return response


@require_GET
@role_required(Role.SRE)
def import_form(request: HttpRequest) -> HttpResponse:
    return render(request, "fleet/import.html", {"form": ImportForm()})


def _format_of(form: ImportForm) -> str:
    chosen = form.cleaned_data["format"]
    if chosen != "auto":
        return chosen
    filename = form.cleaned_data.get("filename")
    if filename:
        return inventory_io.detect_format(filename)
    return "csv" if form.cleaned_data["text"].lstrip().startswith("kind,") else "yaml"


@require_POST
@role_required(Role.SRE)
def import_preview(request: HttpRequest) -> HttpResponse:
    """The dry run: shows what would change, or every error with its line; changes nothing."""
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "fleet/import.html", {"form": form}, status=400)
    try:
        fmt = _format_of(form)
    except ValueError as exc:
        form.add_error("file", str(exc))
        return render(request, "fleet/import.html", {"form": form}, status=400)
    plan = inventory_io.plan_import(text=form.cleaned_data["text"], fmt=fmt)
    context = {"form": form, "plan": plan, "text": form.cleaned_data["text"], "fmt": fmt}
    return render(request, "fleet/import.html", context, status=200 if plan.ok else 400)


@require_POST
@role_required(Role.SRE)
def import_apply(request: HttpRequest) -> HttpResponse:
    """Plans again from the previewed text (the database may have moved) and applies it whole."""
    text, fmt = request.POST.get("text", ""), request.POST.get("fmt", "yaml")
    plan = inventory_io.plan_import(text=text, fmt=fmt if fmt in CONTENT_TYPES else "yaml")
    if not plan.ok:
        form = ImportForm(initial={"text": text, "format": fmt})
        return render(
            request, "fleet/import.html", {"form": form, "plan": plan, "text": text, "fmt": fmt}, status=400
        )
    inventory_io.apply_import(plan=plan, actor=request.user, source="web")
    counts = plan.counts
    done = _("Imported: %(created)d created, %(updated)d updated, %(unchanged)d unchanged.")
    values = {key: counts.get(action, 0) for key, action in _COUNTED.items()}
    messages.success(request, done % values)
    return redirect("fleet:host-list")
