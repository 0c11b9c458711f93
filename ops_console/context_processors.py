from django.utils.translation import gettext_lazy as _

from core.roles import Role, has_role

# (label, URL name, key, the least role that can use the page): each role sees only the
# sections it can open. Viewers read the fleet, incidents, troubleshooting trees and drills;
# the engineer's tools (sizing, config generators, log triage) need the engineer role.
NAVIGATION = [
    (_("Fleet"), "fleet:overview", "fleet", Role.VIEWER),
    (_("Incidents"), "incidents:index", "incidents", Role.VIEWER),
    (_("Troubleshoot"), "diagnostics:troubleshoot", "troubleshoot", Role.VIEWER),
    (_("Sizing"), "diagnostics:sizing", "sizing", Role.ENGINEER),
    (_("Configs"), "diagnostics:configs", "configs", Role.ENGINEER),
    (_("Drills"), "drills:index", "drills", Role.VIEWER),
]


def console(request):
    user = getattr(request, "user", None)
    return {
        "navigation": [(label, name, key) for label, name, key, role in NAVIGATION if has_role(user, role)],
        "can_edit": has_role(user, Role.SRE),
        "can_use_tools": has_role(user, Role.ENGINEER),
    }
