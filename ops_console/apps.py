from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class OpsConsoleConfig(AppConfig):
    name = "ops_console"
    verbose_name = _("Console")
