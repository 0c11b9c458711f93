"""Generic list, detail, create, edit and delete pages, shared by the four inventory kinds.

One flow serves hosts, GPUs, instances and gateways; what differs lives in `kinds.py`
and in each kind's templates (`templates/fleet/<plural>/`).
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.text import capfirst
from django.utils.translation import gettext as _
from django.views import View

from core.htmx import wants_partial
from core.roles import Role, role_required
from fleet import change_tracking, ttft_service
from fleet.models import ChangeLogEntry, Instance
from fleet.views.kinds import Kind

PAGE_SIZE = 25
PAGE_SIZES = (25, 50, 100)


def _page_size(request: HttpRequest) -> int:
    try:
        size = int(request.GET.get("per_page", PAGE_SIZE))
    except ValueError:
        return PAGE_SIZE
    return size if size in PAGE_SIZES else PAGE_SIZE


class _KindView(View):
    kind: Kind = None  # type: ignore[assignment]  # set by as_view(kind=...)
    role = Role.VIEWER

    def dispatch(self, request, *args, **kwargs):
        return role_required(self.role)(super().dispatch)(request, *args, **kwargs)

    def context(self, **extra) -> dict:
        return {"kind": self.kind, **extra}


class ListView(_KindView):
    def get(self, request: HttpRequest) -> HttpResponse:
        filterset = self.kind.filterset_class(request.GET or None, queryset=self.kind.queryset())
        queryset = filterset.qs if filterset.is_bound and filterset.is_valid() else self.kind.queryset()
        page = Paginator(queryset, _page_size(request)).get_page(request.GET.get("page"))
        context = self.context(
            filter=filterset,
            page_obj=page,
            total=self.kind.model.objects.count(),
            table_template=f"{self.kind.template_dir}/_table.html",
        )
        template = "fleet/_results.html" if wants_partial(request, "results") else "fleet/list.html"
        return render(request, template, context)


class DetailView(_KindView):
    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        obj = get_object_or_404(self.kind.detail_queryset(), pk=pk)
        changes = ChangeLogEntry.objects.for_object(obj).select_related("actor")[:50]
        extra = {"ttft": ttft_service.breakdown_for(obj)} if isinstance(obj, Instance) else {}
        return render(
            request,
            f"{self.kind.template_dir}/detail.html",
            self.context(object=obj, changes=changes, **extra),
        )


class EditView(_KindView):
    """Create (no pk) or edit (pk); with X-Validate-Only it validates and saves nothing."""

    role = Role.SRE

    def get_object(self, pk: int | None):
        return get_object_or_404(self.kind.model, pk=pk) if pk else None

    def get(self, request: HttpRequest, pk: int | None = None) -> HttpResponse:
        obj = self.get_object(pk)
        form = self.kind.form_class(instance=obj, initial=request.GET.dict() if obj is None else None)
        return self.render_form(request, form, obj)

    def post(self, request: HttpRequest, pk: int | None = None) -> HttpResponse:
        obj = self.get_object(pk)
        before = change_tracking.snapshot(obj) if obj else None
        form = self.kind.form_class(request.POST, instance=obj)
        if request.headers.get("X-Validate-Only"):
            return self.render_form(request, form, obj, partial=True, validating=True)
        if not form.is_valid():
            return self.render_form(request, form, obj)
        with transaction.atomic():
            saved = form.save()
            if before is None:
                change_tracking.record_create(saved, actor=request.user, source="web")
            else:
                change_tracking.record_update(saved, before=before, actor=request.user, source="web")
        done = _("%(kind)s %(name)s added.") if before is None else _("%(kind)s %(name)s saved.")
        messages.success(request, done % {"kind": capfirst(self.kind.singular_label), "name": saved})
        return redirect(saved.get_absolute_url())

    def render_form(self, request, form, obj, *, partial=False, validating=False) -> HttpResponse:
        if validating:
            _hide_errors_of_untouched_fields(form)
        template = "fleet/_form_fields.html" if partial else "fleet/form.html"
        return render(request, template, self.context(form=form, object=obj))


def _hide_errors_of_untouched_fields(form) -> None:
    """While typing, only complain about what the user has filled in."""
    form.is_valid()
    for name in list(form.errors):
        if name != "__all__" and not form.data.get(name):
            del form.errors[name]


class DeleteView(_KindView):
    role = Role.SRE

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        obj = get_object_or_404(self.kind.model, pk=pk)
        consequences = change_tracking.deletion_consequences(obj)
        return render(
            request, "fleet/confirm_delete.html", self.context(object=obj, consequences=consequences)
        )

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        obj = get_object_or_404(self.kind.model, pk=pk)
        name = str(obj)
        cascaded = change_tracking.delete_with_log(obj, actor=request.user, source="web")
        kind = capfirst(self.kind.singular_label)
        if cascaded:
            done = _("%(kind)s %(name)s deleted with %(count)d dependent object(s).")
        else:
            done = _("%(kind)s %(name)s deleted.")
        messages.success(request, done % {"kind": kind, "name": name, "count": len(cascaded)})
        return redirect(reverse(f"fleet:{self.kind.slug}-list"))
