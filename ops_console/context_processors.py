from core.roles import Role, has_role

NAVIGATION = [
    ("Fleet", "fleet:overview", "fleet"),
    ("Incidents", "incidents:index", "incidents"),
    ("Troubleshoot", "diagnostics:troubleshoot", "troubleshoot"),
    ("Sizing", "diagnostics:sizing", "sizing"),
    ("Configs", "diagnostics:configs", "configs"),
    ("Drills", "drills:index", "drills"),
]


def console(request):
    user = getattr(request, "user", None)
    return {
        "navigation": NAVIGATION,
        "can_edit": has_role(user, Role.SRE),
        "can_use_tools": has_role(user, Role.ENGINEER),
    }
