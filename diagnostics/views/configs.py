"""The config generators: a form per kind whose preview follows the inputs (HTMX), the whole
state in the URL, presets, fill from an instance, gateway or sizing, copy and download (one
file or a tar archive), and the nginx linter."""

from __future__ import annotations

import io
import tarfile
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from core.htmx import wants_partial
from core.roles import Role, role_required
from diagnostics import configgen_fill
from diagnostics.configgen import nginx_lint, registry
from diagnostics.configgen.base import ConfigFile, Generator, SpecErrors
from diagnostics.configgen_forms import config_form, inline_code
from fleet.models import Gateway, Instance

CONTENT_TYPES = {"json": "application/json", "yaml": "application/yaml", "python": "text/x-python"}


def _generator(kind: str) -> Generator:
    try:
        return registry.get(kind)
    except KeyError:
        raise Http404(f"No generator {kind!r}.") from None


def _given(request: HttpRequest, generator: Generator) -> tuple[dict[str, str], list[str]]:
    """The values in the URL, over what an inventory object fills in."""
    names = {f.name for f in generator.fields}
    filled: dict[str, str] = {}
    notes = []
    if instance_id := request.GET.get("from_instance"):
        instance = get_object_or_404(Instance, pk=_pk(instance_id))
        filled = configgen_fill.from_instance(instance)
        notes = [inline_code(_("Filled from instance %(name)s.") % {"name": instance.name})]
    elif gateway_id := request.GET.get("from_gateway"):
        gateway = get_object_or_404(Gateway, pk=_pk(gateway_id))
        filled = configgen_fill.from_gateway(gateway)
        notes = [inline_code(_("Filled from gateway %(name)s.") % {"name": gateway.name})]
    filled = {k: v for k, v in filled.items() if k in names}
    filled.update({k: v for k, v in request.GET.items() if k in names})
    return filled, notes


def _pk(value: str) -> int:
    if not value.isdigit():
        raise Http404("No such inventory object.")
    return int(value)


def generated(generator: Generator, given: dict[str, str], preset: str) -> dict[str, Any]:
    """The preview's context: files and checks, or the errors by field."""
    try:
        values = generator.values(given, preset=preset)
    except SpecErrors as exc:
        values, given_errors = generator.values({}, preset=""), exc.errors
    else:
        given_errors = {}
    try:
        spec = generator.spec(given, preset=preset)
    except SpecErrors as exc:
        return {"values": values, "errors": {**given_errors, **exc.errors}, "files": [], "checks": []}
    return {
        "values": values,
        "errors": given_errors,
        # The files are the same bytes in every language: nothing in a render is translated.
        "files": generator.render(spec),
        "checks": [
            replace(c, title=inline_code(c.title), why=inline_code(c.why)) for c in generator.checks(spec)
        ],
    }


def _shown_errors(errors: dict[str, str]) -> dict[str, str]:
    """Each field's error with its `backticked` identifiers as <code> (translations mark them)."""
    return {name: inline_code(message) for name, message in errors.items()}


@require_GET
@role_required(Role.ENGINEER)
def index(request: HttpRequest) -> HttpResponse:
    generators = [(g, inline_code(g.about)) for g in registry.GENERATORS.values()]
    return render(request, "diagnostics/configs/index.html", {"generators": generators})


@require_GET
@role_required(Role.ENGINEER)
def generator_page(request: HttpRequest, kind: str) -> HttpResponse:
    generator = _generator(kind)
    preset = request.GET.get("preset", "")
    given, notes = _given(request, generator)
    context = generated(generator, given, preset)
    state = {**given, **({"preset": preset} if preset else {})}
    form = config_form(generator, context["values"], context["errors"])
    context.update(
        generator=generator,
        description=inline_code(generator.about),
        errors=_shown_errors(context["errors"]),
        presets=[(key, inline_code(label)) for key, label in generator.preset_labels.items()],
        preset=preset,
        notes=notes,
        query=urlencode(state),
        form=form,
        # Values in the URL this form does not show travel on, so the link and the
        # deployment archive keep them.
        carried={k: v for k, v in given.items() if k not in form.fields},
        deployment=kind in registry.DEPLOYMENT,
        **_instance_picker(request, generator),
    )
    if wants_partial(request, "preview"):
        return render(request, "diagnostics/configs/_preview.html", context)
    return render(request, "diagnostics/configs/generator.html", context)


def _instance_picker(request: HttpRequest, generator: Generator) -> dict[str, Any]:
    """The instances for "Fill from instance", where the generator has a field an instance
    fills. It sends ?from_instance=<pk>, as the instance page's "Launch config" link does."""
    if not configgen_fill.INSTANCE_FIELDS & {f.name for f in generator.fields}:
        return {"instances": None, "from_instance": ""}
    instances = Instance.objects.order_by("name").only("pk", "name", "served_model_name", "engine")
    return {"instances": instances, "from_instance": request.GET.get("from_instance", "")}


@require_GET
@role_required(Role.ENGINEER)
def download(request: HttpRequest, kind: str) -> HttpResponse:
    """One file (?file=NAME), every file of this generator (?archive=1), or the whole launch
    as vllm serve, docker, Kubernetes and systemd files (?archive=deployment)."""
    generator = _generator(kind)
    given, _notes = _given(request, generator)
    preset = request.GET.get("preset", "")
    kinds = (
        registry.DEPLOYMENT
        if request.GET.get("archive") == "deployment" and kind in registry.DEPLOYMENT
        else (kind,)
    )
    files: list[ConfigFile] = []
    try:
        # Every file from this page's values, its own defaults included (k8s: no device list).
        values = generator.values(given, preset=preset)
        for key in kinds:
            files += registry.get(key).render(registry.get(key).spec(values))
    except SpecErrors as exc:
        return HttpResponse(
            _("Cannot generate: %(errors)s") % {"errors": exc} + "\n", status=400, content_type="text/plain"
        )
    wanted = request.GET.get("file")
    if wanted:
        match = next((f for f in files if f.name == wanted), None)
        if match is None:
            raise Http404(f"No file {wanted!r} in this output.")
        return _attachment(
            match.content.encode(), match.name, CONTENT_TYPES.get(match.language, "text/plain")
        )
    return _attachment(_tar(files), f"{kind}-config.tar.gz", "application/gzip")


def _attachment(body: bytes, name: str, content_type: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _tar(files: list[ConfigFile]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for file in files:
            data = file.content.encode()
            info = tarfile.TarInfo(file.name)
            info.size, info.mode = len(data), 0o755 if file.name.endswith(".sh") else 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@require_http_methods(["GET", "POST"])
@role_required(Role.ENGINEER)
def lint(request: HttpRequest) -> HttpResponse:
    context: dict[str, Any] = {"text": "", "longest": "120"}
    if request.method == "POST":
        upload = request.FILES.get("file")
        text = upload.read(nginx_lint.MAX_BYTES + 1) if upload else request.POST.get("text", "")
        context["text"] = text if isinstance(text, str) else ""
        context["longest"] = request.POST.get("longest_generation_s", "120")
        try:
            longest = float(context["longest"])
            result = nginx_lint.lint(text, longest_generation_s=longest)
            context["result"] = result
            context["findings"] = [
                replace(f, title=inline_code(f.title), why=inline_code(f.why)) for f in result.findings
            ]
        except ValueError as exc:  # LintInputError, or a longest generation that is not a number
            context["error"] = (
                str(exc)
                if isinstance(exc, nginx_lint.LintInputError)
                else _("Longest generation: a number of seconds.")
            )
        if isinstance(text, bytes) and "result" in context:
            context["text"] = text.decode("utf-8", errors="replace")
    status = 400 if "error" in context else 200
    return render(request, "diagnostics/configs/lint.html", context, status=status)
