"""Decision-tree walkthroughs: each answer swaps in the next step over HTMX, the path is in
the URL, back and restart are links; from an instance, the probes answer what they can
with their evidence and the engineer may override, and the commands point at the instance;
a walkthrough can be saved."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.htmx import wants_partial
from core.roles import Role, role_required
from core.taxonomy import label
from diagnostics.models import SavedWalkthrough
from diagnostics.trees.commands import Target, fill
from diagnostics.trees.model import Node, trees
from diagnostics.trees.walk import Facts, Walk, walk
from fleet.models import Instance


def _path(request: HttpRequest) -> list[int]:
    raw = request.GET.get("path") or request.POST.get("path") or ""
    try:
        return [int(part) for part in raw.split(".") if part != ""][:64]
    except ValueError:
        return []


def _facts(instance: Instance | None) -> Facts | None:
    if instance is None:
        return None
    state = getattr(instance, "state", None)
    if state is None:
        return Facts(findings=[], measured=set(), instance_name=instance.name)
    measured = {kind for kind in state.kinds if state.measured_at(kind)}
    return Facts(findings=list(state.findings or []), measured=measured, instance_name=instance.name)


def _instance(request: HttpRequest) -> Instance | None:
    pk = request.GET.get("instance") or request.POST.get("instance")
    if not pk or not str(pk).isdigit():
        return None
    return get_object_or_404(Instance.objects.select_related("state"), pk=pk)


def _target(instance: Instance | None) -> Target | None:
    if instance is None:
        return None
    gateway = instance.gateways.order_by("name").first()
    return Target(
        base_url=instance.base_url,
        model=instance.served_model_name,
        gateway_url=gateway.url if gateway else "",
    )


def _shown(node: Node | None, target: Target | None) -> dict[str, str]:
    """The node's texts with the instance's address, port, model and gateway filled in."""
    if node is None:
        return {}
    return {key: fill(getattr(node, key), target=target) for key in ("how", "command", "fix")}


def link(tree_id: str, path: list[int], instance: Instance | None) -> str:
    params = {"path": ".".join(str(p) for p in path)} if path else {}
    if instance is not None:
        params["instance"] = str(instance.pk)
    query = urlencode(params)
    return reverse("diagnostics:walkthrough", args=[tree_id]) + (f"?{query}" if query else "")


@require_GET
@role_required(Role.VIEWER)
def index(request: HttpRequest) -> HttpResponse:
    context = {
        "trees": trees().values(),
        "saved": SavedWalkthrough.objects.select_related("instance")[:10],
        "instances": Instance.objects.enabled().select_related("state").order_by("name")[:50],
    }
    return render(request, "diagnostics/troubleshoot/index.html", context)


@require_GET
@role_required(Role.VIEWER)
def walkthrough(request: HttpRequest, tree_id: str) -> HttpResponse:
    if tree_id not in trees():
        raise Http404(f"No tree {tree_id!r}.")
    instance = _instance(request)
    result = walk(trees(), tree_id, _path(request), _facts(instance))
    context = _context(tree_id, result, instance)
    if wants_partial(request, "walk"):
        return render(request, "diagnostics/troubleshoot/_walk.html", context)
    return render(request, "diagnostics/troubleshoot/walkthrough.html", context)


def _context(tree_id: str, result: Walk, instance: Instance | None) -> dict[str, Any]:
    steps = []
    for i, step in enumerate(result.steps):
        before = result.path(i)
        alternatives = [
            (answer.answer, link(tree_id, [*before, j], instance), j == step.chosen)
            for j, answer in enumerate(step.node.answers)
        ]
        steps.append({"step": step, "alternatives": alternatives})
    here = result.path()
    options = []
    if result.current and not result.current.is_leaf:
        options = [
            (a.answer, link(tree_id, [*here, j], instance)) for j, a in enumerate(result.current.answers)
        ]
    return {
        "tree": trees()[tree_id],
        "walk": result,
        "steps": steps,
        "options": options,
        "instance": instance,
        "back": link(tree_id, here[:-1], instance) if here else "",
        "restart": link(tree_id, [], instance),
        "here": ".".join(str(p) for p in here),
        "category_label": label(result.current.category)
        if result.finished and result.current.category
        else "",
        "config_link": _config_link(result),
        "shown": _shown(result.current, _target(instance)),
    }


def _config_link(result: Walk) -> str:
    config = result.current.config if result.finished and result.current else None
    if config is None:
        return ""
    params = dict(config.values)
    if config.preset:
        params["preset"] = config.preset
    return reverse("diagnostics:config-generator", args=[config.kind]) + "?" + urlencode(params)


@require_GET
@role_required(Role.VIEWER)
def for_instance(request: HttpRequest, pk: int) -> HttpResponse:
    """Start the guide's tree for an instance: the probes answer what they can."""
    instance = get_object_or_404(Instance, pk=pk)
    return redirect(link("guide", [], instance))


@require_POST
@role_required(Role.ENGINEER)
def save(request: HttpRequest, tree_id: str) -> HttpResponse:
    if tree_id not in trees():
        raise Http404(f"No tree {tree_id!r}.")
    instance = _instance(request)
    result = walk(trees(), tree_id, _path(request), _facts(instance))
    leaf = result.current if result.finished else None
    saved = SavedWalkthrough.objects.create(
        tree=tree_id,
        path=result.path(),
        instance=instance,
        title=_title(request.POST.get("title"), trees()[tree_id].title, leaf),
        notes=(request.POST.get("notes") or "")[:5000],
        outcome_category=leaf.category if leaf else "",
        outcome=f"{leaf.cause}\n\nFix: {leaf.fix}" if leaf else "",
        steps=[
            {"question": s.node.question, "answer": s.answer.answer, "by": s.by, "evidence": s.evidence}
            for s in result.steps
        ],
        created_by=request.user.get_username(),
    )
    messages.success(request, f"Saved as “{saved.title}”.")
    return redirect("diagnostics:walkthrough-saved", pk=saved.pk)


def _title(given: str | None, tree_title: str, leaf) -> str:
    title = (given or "").strip() or f"{tree_title}: {leaf.cause if leaf else 'unfinished'}"
    return title if len(title) <= 200 else title[:199] + "…"


@require_GET
@role_required(Role.VIEWER)
def saved(request: HttpRequest, pk: int) -> HttpResponse:
    item = get_object_or_404(SavedWalkthrough.objects.select_related("instance"), pk=pk)
    resume = link(item.tree, item.path, item.instance) if item.tree in trees() else ""
    return render(request, "diagnostics/troubleshoot/saved.html", {"item": item, "resume": resume})
