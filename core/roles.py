"""Roles are Django groups, ordered: each role can do what the ones below it can.

viewer reads; engineer also uses the tools (sizing, configs, troubleshooting);
sre also edits the inventory and incidents; admin also manages users.
Superusers count as admin.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext_lazy as _
from rest_framework.permissions import SAFE_METHODS, BasePermission


class Role(IntEnum):
    VIEWER = 1
    ENGINEER = 2
    SRE = 3
    ADMIN = 4

    @property
    def group_name(self) -> str:
        return self.name.lower()


def role_of(user: Any) -> Role | None:
    """The highest role the user holds, or None for anonymous users and users in no role group."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_superuser:
        return Role.ADMIN
    cached = getattr(user, "_ops_role", False)
    if cached is not False:
        return cached
    names = set(user.groups.values_list("name", flat=True))
    held = [role for role in Role if role.group_name in names]
    user._ops_role = max(held) if held else None
    return user._ops_role


def has_role(user: Any, role: Role) -> bool:
    current = role_of(user)
    return current is not None and current >= role


def role_required(role: Role) -> Callable:
    """View decorator: log in first, then 403 unless the user holds `role` or a higher one."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not has_role(request.user, role):
                raise PermissionDenied(f"This needs the {role.group_name} role.")
            return view(request, *args, **kwargs)

        return login_required(wrapped)

    return decorator


class InventoryPermission(BasePermission):
    """API: viewers read, SREs write."""

    message = _("Reading needs the viewer role and changing the inventory needs the sre role.")

    def has_permission(self, request, view) -> bool:
        needed = Role.VIEWER if request.method in SAFE_METHODS else Role.SRE
        return has_role(request.user, needed)


class ToolPermission(BasePermission):
    """API: the engineer's tools (sizing, configs, troubleshooting) need the engineer role."""

    message = _("The console's tools need the engineer role.")

    def has_permission(self, request, view) -> bool:
        return has_role(request.user, Role.ENGINEER)
