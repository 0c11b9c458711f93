from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DiagnosticsConfig(AppConfig):
    name = "diagnostics"
    verbose_name = _("Diagnostics")

    def ready(self) -> None:
        from diagnostics import checks  # noqa: F401  (registers the start-up checks)
