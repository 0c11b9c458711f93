from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DiagnosticsConfig(AppConfig):
    name = "diagnostics"
    verbose_name = _("Diagnostics")

    def ready(self) -> None:
        from diagnostics import checks  # noqa: F401  (registers the start-up checks)
        from fleet.agent.signals import agent_answered

        agent_answered.connect(_judge_predeploy, dispatch_uid="diagnostics.predeploy")


def _judge_predeploy(sender, *, request, **kwargs) -> None:  # noqa: ANN001
    from diagnostics.predeploy_service import judge_answer

    judge_answer(request)
