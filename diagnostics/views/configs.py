"""The config generators: a form per kind whose preview follows the inputs (HTMX), the whole
state in the URL, presets, fill from an instance, gateway or sizing, copy and download (one
file or a tar archive), and the nginx linter."""

from __future__ import annotations

import io
import tarfile
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_http_methods

from core.htmx import wants_partial
from core.roles import Role, role_required
from diagnostics import configgen_fill
from diagnostics.configgen import nginx_lint, registry
from diagnostics.configgen.base import ConfigFile, Generator, SpecErrors
from diagnostics.configgen_forms import config_form
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
        instance = get_object_or_404(Instance, pk=instance_id)
        filled, notes = configgen_fill.from_instance(instance), [f"Filled from instance {instance.name}."]
    elif gateway_id := request.GET.get("from_gateway"):
        gateway = get_object_or_404(Gateway, pk=gateway_id)
        filled, notes = configgen_fill.from_gateway(gateway), [f"Filled from gateway {gateway.name}."]
    filled = {k: v for k, v in filled.items() if k in names}
    filled.update({k: v for k, v in request.GET.items() if k in names})
    return filled, notes


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
        "files": generator.render(spec),
        "checks": generator.checks(spec),
    }


@require_GET
@role_required(Role.ENGINEER)
def index(request: HttpRequest) -> HttpResponse:
    return render(request, "diagnostics/configs/index.html", {"generators": registry.GENERATORS.values()})


@require_GET
@role_required(Role.ENGINEER)
def generator_page(request: HttpRequest, kind: str) -> HttpResponse:
    generator = _generator(kind)
    preset = request.GET.get("preset", "")
    given, notes = _given(request, generator)
    context = generated(generator, given, preset)
    state = {**given, **({"preset": preset} if preset else {})}
    context.update(
        generator=generator,
        preset=preset,
        notes=notes,
        query=urlencode(state),
        form=config_form(generator, context["values"], context["errors"]),
        deployment=kind in registry.DEPLOYMENT,
    )
    if wants_partial(request, "preview"):
        return render(request, "diagnostics/configs/_preview.html", context)
    return render(request, "diagnostics/configs/generator.html", context)


@require_GET
@role_required(Role.ENGINEER)
def download(request: HttpRequest, kind: str) -> HttpResponse:
    """One file (?file=NAME), every file of this generator (?archive=1), or the whole launch
    as vllm serve, docker, Kubernetes and systemd files (?archive=deployment)."""
    generator = _generator(kind)
    given, _ = _given(request, generator)
    preset = request.GET.get("preset", "")
    kinds = (
        registry.DEPLOYMENT
        if request.GET.get("archive") == "deployment" and kind in registry.DEPLOYMENT
        else (kind,)
    )
    files: list[ConfigFile] = []
    try:
        for key in kinds:
            files += registry.get(key).render(registry.get(key).spec(given, preset=preset))
    except SpecErrors as exc:
        return HttpResponse(f"Cannot generate: {exc}\n", status=400, content_type="text/plain")
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
            context["result"] = nginx_lint.lint(text, longest_generation_s=longest)
        except ValueError as exc:  # LintInputError, or a longest generation that is not a number
            context["error"] = (
                str(exc)
                if isinstance(exc, nginx_lint.LintInputError)
                else "Longest generation: a number of seconds."
            )
        if isinstance(text, bytes) and "result" in context:
            context["text"] = text.decode("utf-8", errors="replace")
    status = 400 if "error" in context else 200
    return render(request, "diagnostics/configs/lint.html", context, status=status)
