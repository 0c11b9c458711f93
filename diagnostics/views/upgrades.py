"""The upgrade diff page: from-version, to-version, one instance or the whole fleet; the report
in sections (metrics, flags, defaults with sizing, regenerated configs), and the regenerated
configs to download one by one or as an archive. The report itself is diagnostics/upgrades."""

from __future__ import annotations

import html
import io
import tarfile
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.html import strip_tags
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy
from django.views.decorators.http import require_GET

from core.roles import Role, role_required
from diagnostics.configgen import registry
from diagnostics.upgrades import present, service
from diagnostics.upgrades.diff import Report, SizingDiff
from diagnostics.upgrades.forms import UpgradeForm

CONTENT_TYPES = {"json": "application/json", "yaml": "application/yaml", "bash": "text/x-shellscript"}

SOURCES = {
    "console": gettext_lazy("Console probes"),
    "alerts": gettext_lazy("Generated alert rules"),
    "dashboard": gettext_lazy("Generated dashboard"),
    "regenerated": gettext_lazy("Regenerated configs"),
}
SEVERITIES = {
    "bad": pgettext_lazy("upgrade diff severity", "breaks"),
    "warning": pgettext_lazy("upgrade diff severity", "warning"),
    "info": pgettext_lazy("upgrade diff severity", "info"),
    "ok": pgettext_lazy("upgrade diff severity", "ok"),
}
BADGES = {"bad": "bad", "warning": "severity-warning", "info": "severity-info", "ok": "ok"}
CHANGES = {
    "added": pgettext_lazy("launch flag change", "added"),
    "deprecated": pgettext_lazy("launch flag change", "deprecated"),
    "removed": pgettext_lazy("launch flag change", "removed"),
    "meaning": pgettext_lazy("launch flag change", "changes meaning"),
    "env": pgettext_lazy("launch flag change", "environment variable"),
}
FIGURES = (
    ("kv_cache_tokens", gettext_lazy("KV cache (tokens)"), "{:,}"),
    ("kv_cache_blocks", gettext_lazy("KV cache blocks"), "{:,}"),
    ("max_concurrency", gettext_lazy("Requests of `max_model_len` at once"), "{:.2f}x"),
    ("concurrency_at_average", gettext_lazy("Requests of the average length at once"), "{:.1f}x"),
    ("running_at_average", gettext_lazy("Running at once (capped by `max_num_seqs`)"), "{:,}"),
    ("max_num_seqs", "`max_num_seqs`", "{:,}"),
    ("max_num_batched_tokens", "`max_num_batched_tokens`", "{:,}"),
    ("gpu_memory_utilization", "`gpu_memory_utilization`", "{:g}"),
    ("available_kv_gib", gettext_lazy("KV cache memory per GPU (GiB)"), "{:.2f}"),
    ("cuda_graphs_gib", gettext_lazy("CUDA graphs taken from it (GiB)"), "{:.2f}"),
)


def _state(form: UpgradeForm) -> dict[str, str]:
    data = form.cleaned_data
    state = {"from_version": data["from_version"], "to_version": data["to_version"]}
    if data.get("instance") is not None:
        state["instance"] = str(data["instance"].pk)
    return state


def _report(form: UpgradeForm) -> Report:
    data = form.cleaned_data
    return service.report(data["from_version"], data["to_version"], instance=data.get("instance"))


@require_GET
@role_required(Role.ENGINEER)
def page(request: HttpRequest) -> HttpResponse:
    asked = "to_version" in request.GET or "from_version" in request.GET
    initial = {}
    if not asked and (pk := request.GET.get("instance", "")).isdigit():
        initial["instance"] = pk  # the instance page's link: pick it, take its version as "from"
    form = UpgradeForm(request.GET if asked else None, initial=initial)
    context: dict[str, Any] = {"form": form}
    if asked and form.is_valid():
        report = _report(form)
        context.update(_shown(report), report=report, query=urlencode(_state(form)))
    return render(request, "diagnostics/upgrades/page.html", context, status=400 if form.errors else 200)


@require_GET
@role_required(Role.ENGINEER)
def download(request: HttpRequest) -> HttpResponse:
    """One regenerated file (?file=NAME) or all of them (?archive=1), for the same query."""
    form = UpgradeForm(request.GET)
    if not form.is_valid():
        errors = "; ".join(
            f"{name}: {html.unescape(strip_tags(' '.join(messages)))}"
            for name, messages in form.errors.items()
        )
        return HttpResponse(
            _("Cannot compare: %(errors)s") % {"errors": errors} + "\n", status=400, content_type="text/plain"
        )
    report = _report(form)
    wanted = request.GET.get("file")
    if wanted:
        file = report.file(wanted)
        if file is None:
            raise Http404(f"No file {wanted!r} in this report.")
        return _attachment(file.content.encode(), file.name, CONTENT_TYPES.get(file.language, "text/plain"))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for file in report.files:
            data = file.content.encode()
            info = tarfile.TarInfo(file.name)
            info.size, info.mode = len(data), 0o755 if file.name.endswith(".sh") else 0o644
            archive.addfile(info, io.BytesIO(data))
    name = f"vllm-{report.new_label}-configs.tar.gz"
    return _attachment(buffer.getvalue(), name, "application/gzip")


def _attachment(body: bytes, name: str, content_type: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


# -- the report as the template shows it -----------------------------------------------------------


def _shown(report: Report) -> dict[str, Any]:
    metrics = [
        {
            "finding": m,
            "severity": SEVERITIES[m.severity],
            "badge": BADGES[m.severity],
            "source": SOURCES.get(m.source, m.source),
            "message": present.html(m.message),
            "advice": [present.html(a) for a in m.advice],
            "about": present.html(m.about) if m.about else "",
            "sources": m.fact.sources if m.fact else (),
            "inferred": bool(m.fact and m.fact.certainty != "source"),
        }
        for m in report.metrics
    ]
    flags = [
        {
            "finding": f,
            "severity": SEVERITIES[f.severity],
            "badge": BADGES[f.severity],
            "change": CHANGES.get(f.change.kind, f.change.kind),
            "message": present.html(f.message),
            "sources": f.change.sources,
            "inferred": f.change.certainty != "source",
        }
        for f in report.flags
    ]
    defaults = [
        {
            "finding": d,
            "message": present.html(d.message),
            "applies": [present.html(a) for a in d.applies],
            "sources": d.change.sources,
            "inferred": d.change.certainty != "source",
        }
        for d in report.defaults
    ]
    return {
        "metrics": metrics,
        "problems": [m for m in metrics if m["finding"].severity in ("bad", "warning")],
        "flags": flags,
        "commands": [c for c in report.commands if c.dropped or c.added or c.changed or c.error],
        "defaults": defaults,
        "sizings": [_sizing(s) for s in report.sizing],
        "counts": report.counts(),
        "errors": [present.html(e) for e in report.errors],
        "choices": [(registry.get(key).title, old, new) for key, (old, new) in report.choices.items()],
        "launches": any(c.target for c in report.commands),
    }


def _sizing(sizing: SizingDiff) -> dict[str, Any]:
    summaries = [case.summary() for case in sizing.cases]
    rows = []
    for key, name, fmt in FIGURES:
        cells = [fmt.format(s[key]) if s else "" for s in summaries]
        before, after = summaries[0] if summaries else None, summaries[1] if len(summaries) > 1 else None
        change = ""
        if before and after and isinstance(before[key], int | float) and before[key] != after[key]:
            delta = after[key] - before[key]
            change = ("+" if delta > 0 else "") + (f"{delta:,}" if isinstance(delta, int) else f"{delta:.2f}")
        rows.append({"name": present.html(str(name)), "cells": cells, "change": change})
    return {
        "target": sizing.target,
        "problem": present.html(sizing.problem) if sizing.problem else "",
        "notes": [present.html(n) for n in sizing.notes],
        "cases": [
            {
                "title": present.html(case.title),
                "modelled": case.modelled,
                "problem": present.html(case.problem) if case.problem else "",
                "error": (s or {}).get("error"),
                "fits": (s or {}).get("fits"),
            }
            for case, s in zip(sizing.cases, summaries, strict=True)
        ],
        "rows": rows if any(summaries) else [],
    }
