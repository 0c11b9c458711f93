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
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST

from core.htmx import wants_partial
from core.i18n import Message
from core.i18n import shown as shown_message
from core.roles import Role, role_required
from core.taxonomy import label
from diagnostics.models import SavedWalkthrough
from diagnostics.trees import shown
from diagnostics.trees.commands import Target, fill
from diagnostics.trees.model import Node, Tree, trees
from diagnostics.trees.walk import Facts, Step, Walk, walk
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


def _shown(node: Node | None, target: Target | None) -> dict[str, Any]:
    """The node's texts in the reader's language, with the instance's address, port, model
    and gateway filled in; the command and metric are identifiers and stay as they are."""
    if node is None:
        return {}
    texts: dict[str, Any] = {
        key: shown.rich(getattr(node, key), target=target)
        for key in ("question", "how", "note", "cause", "fix")
    }
    return texts | {"command": fill(node.command, target=target), "metric": node.metric}


def _tree_texts(tree: Tree) -> dict[str, Any]:
    return {
        "id": tree.id,
        "title": shown.rich(tree.title),
        "plain_title": shown.plain(tree.title),
        "summary": shown.rich(tree.summary),
    }


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
        "trees": [_tree_texts(tree) for tree in trees().values()],
        "saved": [
            (item, _saved_title(item)) for item in SavedWalkthrough.objects.select_related("instance")[:10]
        ],
        "instances": Instance.objects.enabled().select_related("state").order_by("name")[:50],
    }
    return render(request, "diagnostics/troubleshoot/index.html", context)


@require_GET
@role_required(Role.VIEWER)
def walkthrough(request: HttpRequest, tree_id: str) -> HttpResponse:
    if tree_id not in trees():
        raise Http404(f"No tree {tree_id!r}.")
    return _walk_page(request, tree_id, _instance(request))


def _walk_page(request: HttpRequest, tree_id: str, instance: Instance | None) -> HttpResponse:
    result = walk(trees(), tree_id, _path(request), _facts(instance))
    context = _context(tree_id, result, instance)
    if wants_partial(request, "walk"):
        return render(request, "diagnostics/troubleshoot/_walk.html", context)
    return render(request, "diagnostics/troubleshoot/walkthrough.html", context)


def _step(step: Step, before: list[int], tree_id: str, instance: Instance | None) -> dict[str, Any]:
    alternatives = [
        (shown.rich(answer.answer), link(tree_id, [*before, j], instance), j == step.chosen)
        for j, answer in enumerate(step.node.answers)
    ]
    return {
        "step": step,
        "question": shown.rich(step.node.question),
        "answer": shown.rich(step.answer.answer),
        "by_label": shown.by_label(step.by),
        "evidence": shown_message(step.evidence_message, fallback=step.evidence),
        "alternatives": alternatives,
    }


def _context(tree_id: str, result: Walk, instance: Instance | None) -> dict[str, Any]:
    steps = [_step(step, result.path(i), tree_id, instance) for i, step in enumerate(result.steps)]
    here = result.path()
    options = []
    if result.current and not result.current.is_leaf:
        options = [
            (shown.rich(a.answer), link(tree_id, [*here, j], instance))
            for j, a in enumerate(result.current.answers)
        ]
    tree = trees()[tree_id]
    see = result.current.see if result.finished and result.current else ()
    return {
        "tree": tree,
        "tree_texts": _tree_texts(tree),
        "corrections": [(shown.rich(c.text), c.sources) for c in tree.corrections],
        "see": [(other, shown.plain(trees()[other].title)) for other in see if other in trees()],
        "problem": shown_message(result.problem_message, fallback=result.problem),
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
    """Start the guide's tree for an instance: the probes answer what they can. The page is
    the guide's walkthrough for the instance; its links carry on at the walkthrough's URL."""
    instance = get_object_or_404(Instance.objects.select_related("state"), pk=pk)
    return _walk_page(request, "guide", instance)


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
        outcome=f"{leaf.cause}{shown.OUTCOME_FIX}{leaf.fix}" if leaf else "",
        steps=[_saved_step(s) for s in result.steps],
        created_by=request.user.get_username(),
    )
    messages.success(request, gettext("Saved as “%(title)s”.") % {"title": _saved_title(saved, plain=True)})
    return redirect("diagnostics:walkthrough-saved", pk=saved.pk)


def _saved_step(step: Step) -> dict[str, Any]:
    """A step as it is kept: the English texts, and the evidence as a message to show later."""
    kept = {
        "question": step.node.question,
        "answer": step.answer.answer,
        "by": step.by,
        "evidence": step.evidence,
    }
    if isinstance(step.evidence_message, Message):
        kept["evidence_message"] = step.evidence_message.to_json()
    return kept


def _title(given: str | None, tree_title: str, leaf) -> str:
    title = (given or "").strip()
    if title:
        return title if len(title) <= 200 else title[:199] + "…"
    return shown.default_title(tree_title, leaf.cause if leaf else "")


@require_GET
@role_required(Role.VIEWER)
def saved(request: HttpRequest, pk: int) -> HttpResponse:
    item = get_object_or_404(SavedWalkthrough.objects.select_related("instance"), pk=pk)
    resume = link(item.tree, item.path, item.instance) if item.tree in trees() else ""
    context = {
        "item": item,
        "resume": resume,
        "title": _saved_title(item),
        "plain_title": _saved_title(item, plain=True),
        "steps": [shown.saved_step(step) for step in item.steps if isinstance(step, dict)],
        "outcome": shown.saved_outcome(item.outcome),
    }
    return render(request, "diagnostics/troubleshoot/saved.html", context)


def _saved_title(item: SavedWalkthrough, *, plain: bool = False) -> str:
    """The saved walkthrough's title in the reader's language: as HTML, or `plain` text."""
    tree = trees().get(item.tree)
    texts = {"title": item.title, "tree_title": tree.title if tree else "", "outcome": item.outcome}
    if plain:
        return shown.saved_plain_title(**texts, category=item.outcome_category)
    return shown.saved_title(**texts)
