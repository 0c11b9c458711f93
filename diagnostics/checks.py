"""Start-up checks: the decision trees and the triage rules are data, and a broken file is
an error when the console starts (and in `manage.py check`), not when an engineer opens it."""

from __future__ import annotations

from django.core.checks import Error, register


@register()
def troubleshooting_data(app_configs, **kwargs) -> list[Error]:
    from diagnostics.trees.model import TreeError, load
    from diagnostics.triage.rules import RuleError
    from diagnostics.triage.rules import load as load_rules

    errors = []
    try:
        load()
    except TreeError as exc:
        errors.append(Error(f"Decision trees: {exc}", id="diagnostics.E001"))
    try:
        load_rules()
    except RuleError as exc:
        errors.append(Error(f"Triage rules: {exc}", id="diagnostics.E002"))
    return errors
