from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class IncidentsConfig(AppConfig):
    name = "incidents"
    verbose_name = _("Incidents")

    def ready(self) -> None:
        from fleet.agent.signals import agent_answered

        agent_answered.connect(_attach_pulled_log, dispatch_uid="incidents.log_pulls")


def _attach_pulled_log(sender, *, request, **kwargs) -> None:  # noqa: ANN001
    from incidents.log_pulls import attach_pulled_log

    attach_pulled_log(request)
