"""Instances that share a base URL or a GPU with another instance.

Two inventory rows for one engine (the same base URL) double its probes and its alerts;
two engines on one GPU compete for its memory. Both are sometimes meant (an alias for the
same server, a small embedding model beside a large one), so nothing here forbids them:
the form and the API refuse new sharing unless told it is on purpose, the import warns,
and the instance pages show it.

Base URLs are compared normalised (see `normalised_url`): http://Node-A:80/ and
http://node-a are one server.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from fleet.models import Gpu, Instance

DEFAULT_PORTS = {"http": 80, "https": 443}


def normalised_url(url: str) -> str:
    """The URL as compared: scheme and host lower-cased, the scheme's default port and
    trailing slashes dropped, the fragment ignored. An unparseable URL is only trimmed."""
    text = (url or "").strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text.rstrip("/")
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literals keep their brackets
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


@dataclass(frozen=True)
class SharedGpu:
    gpu: Gpu
    others: tuple[Instance, ...]  # the other instances on this GPU, by name


@dataclass(frozen=True)
class Sharing:
    """What one instance shares with others: its base URL and which of its GPUs."""

    base_url: tuple[Instance, ...] = ()  # the others serving the same (normalised) base URL
    gpus: tuple[SharedGpu, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.base_url or self.gpus)

    @property
    def instances(self) -> list[Instance]:
        """Every other instance it shares something with, once each, by name."""
        found = {i.pk: i for i in self.base_url}
        for shared in self.gpus:
            found.update((i.pk, i) for i in shared.others)
        return sorted(found.values(), key=lambda i: i.name)


def sharing_of(*, base_url: str, gpus: Iterable[Gpu], exclude_pk: int | None = None) -> Sharing:
    """What an instance with this base URL and these GPUs would share with the saved
    instances other than `exclude_pk` (itself, when it is saved). Two queries."""
    key = normalised_url(base_url) if base_url else ""
    url_peers = [i for i in _by_url([base_url]).get(key, []) if i.pk != exclude_pk]
    shared = []
    for gpu, users in _users_of_gpus([g.pk for g in gpus]).values():
        others = tuple(i for i in users if i.pk != exclude_pk)
        if others:
            shared.append(SharedGpu(gpu=gpu, others=others))
    return Sharing(base_url=tuple(url_peers), gpus=_by_index(shared))


def sharing_by_instance(instances: Sequence[Instance]) -> dict[int, Sharing]:
    """{instance id: its Sharing} for saved instances, in two queries whatever their number."""
    by_url = _by_url(i.base_url for i in instances)
    through = Instance.gpus.through.objects.filter(instance_id__in=[i.pk for i in instances])
    users = _users_of_gpus(through.values("gpu_id"))
    found = {}
    for instance in instances:
        same_url = by_url.get(normalised_url(instance.base_url), [])
        shared = [
            SharedGpu(gpu=gpu, others=tuple(i for i in on_gpu if i.pk != instance.pk))
            for gpu, on_gpu in users.values()
            if len(on_gpu) > 1 and any(i.pk == instance.pk for i in on_gpu)
        ]
        found[instance.pk] = Sharing(
            base_url=tuple(i for i in same_url if i.pk != instance.pk), gpus=_by_index(shared)
        )
    return found


def added_sharing(*, before: Sharing, after: Sharing) -> Sharing:
    """What `after` shares that `before` did not: an edit is refused only for sharing it
    adds, so an instance saved as shared on purpose can be edited without asking again."""
    had_url = {i.pk for i in before.base_url}
    had_gpu = {(s.gpu.pk, i.pk) for s in before.gpus for i in s.others}
    gpus = []
    for shared in after.gpus:
        others = tuple(i for i in shared.others if (shared.gpu.pk, i.pk) not in had_gpu)
        if others:
            gpus.append(SharedGpu(gpu=shared.gpu, others=others))
    return Sharing(base_url=tuple(i for i in after.base_url if i.pk not in had_url), gpus=tuple(gpus))


def conflict_messages(sharing: Sharing) -> dict[str, list[str]]:
    """{field: messages} naming what is shared, for the base_url and gpus fields."""
    messages: dict[str, list[str]] = {}
    if sharing.base_url:
        names = ", ".join(i.name for i in sharing.base_url)
        text = ngettext(
            "%(names)s already serves %(url)s.",
            "%(names)s already serve %(url)s.",
            len(sharing.base_url),
        )
        messages["base_url"] = [text % {"names": names, "url": sharing.base_url[0].base_url}]
    if sharing.gpus:
        messages["gpus"] = [
            _("%(gpu)s is already used by %(names)s.")
            % {"gpu": shared.gpu, "names": ", ".join(i.name for i in shared.others)}
            for shared in sharing.gpus
        ]
    return messages


def _by_url(urls: Iterable[str]) -> dict[str, list[Instance]]:
    """Saved instances by normalised base URL, for these URLs only (one query)."""
    wanted = {normalised_url(u) for u in urls if u}
    hosts = {_host(u) for u in wanted} - {""}
    if not hosts:
        return {}
    # Narrow by host in SQL; the exact comparison is the normalised one below.
    matches_a_host = Q()
    for host in hosts:
        matches_a_host |= Q(base_url__icontains=host)
    found: dict[str, list[Instance]] = {}
    candidates = Instance.objects.filter(matches_a_host).only("id", "name", "base_url").order_by("name")
    for instance in candidates:
        key = normalised_url(instance.base_url)
        if key in wanted:
            found.setdefault(key, []).append(instance)
    return found


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _users_of_gpus(gpu_ids: Iterable[int] | QuerySet) -> dict[int, tuple[Gpu, list[Instance]]]:
    """{GPU id: (the GPU, the instances using it, by name)} (one query)."""
    rows = (
        Instance.gpus.through.objects.filter(gpu_id__in=gpu_ids)
        .select_related("gpu__host", "instance")
        .order_by("instance__name")
    )
    users: dict[int, tuple[Gpu, list[Instance]]] = {}
    for row in rows:
        users.setdefault(row.gpu_id, (row.gpu, []))[1].append(row.instance)
    return users


def _by_index(shared: list[SharedGpu]) -> tuple[SharedGpu, ...]:
    return tuple(sorted(shared, key=lambda s: (s.gpu.host.name, s.gpu.index)))
