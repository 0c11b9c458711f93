from django.apps import AppConfig


class OpsConsoleConfig(AppConfig):
    name = "ops_console"
    verbose_name = "Console"
