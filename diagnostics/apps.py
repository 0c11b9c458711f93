from django.apps import AppConfig


class DiagnosticsConfig(AppConfig):
    name = "diagnostics"

    def ready(self) -> None:
        from diagnostics import checks  # noqa: F401  (registers the start-up checks)
