"""The pre-deploy checklist on a host's page: pick an instance (what it will run), the
host's agent gathers the facts, the run's items appear as they are judged (polled)."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_http_methods

from core.i18n import shown
from core.roles import Role, has_role, role_required
from diagnostics import predeploy_service
from diagnostics.models import PredeployRun
from fleet.agent.status import agent_of
from fleet.models import GpuHost

POLL_SECONDS = 2
RECENT = 5


class PredeployForm(forms.Form):
    instance = forms.ModelChoiceField(queryset=None, label=_("For the instance"), empty_label=None)
    model_dir = forms.CharField(
        label=_("Model directory on the host"),
        max_length=1024,
        help_text=_(
            "An absolute path; the checklist looks for config.json, the tokenizer and the weights there."
        ),
    )

    def __init__(self, *args, host: GpuHost, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["instance"].queryset = host.instances.order_by("name")

    def clean_model_dir(self) -> str:
        value = self.cleaned_data["model_dir"].strip()
        if not value.startswith("/") or "\x00" in value:
            raise forms.ValidationError(_("Give an absolute path, like /models/Qwen2.5-72B-Instruct."))
        return value


def _host(pk: int) -> GpuHost:
    return get_object_or_404(GpuHost.objects.filter(drill=False).select_related("agent"), pk=pk)


@require_http_methods(["GET", "POST"])
@role_required(Role.VIEWER)
def host_panel(request: HttpRequest, pk: int) -> HttpResponse:
    host = _host(pk)
    may_run = has_role(request.user, Role.ENGINEER)
    form, started, error = None, None, None
    if request.method == "POST":
        if not may_run:
            return HttpResponse(status=403)
        form = PredeployForm(request.POST, host=host)
        if form.is_valid():
            try:
                started = predeploy_service.start(
                    host=host,
                    instance=form.cleaned_data["instance"],
                    model_dir=form.cleaned_data["model_dir"],
                    requested_by=request.user.get_username(),
                )
                form = None
            except predeploy_service.NoAgent as exc:
                error = shown(exc.args[0])
    if form is None and may_run:
        first = host.instances.order_by("name").first()
        initial = (
            {"instance": first, "model_dir": predeploy_service.default_model_dir(first)} if first else {}
        )
        form = PredeployForm(host=host, initial=initial)
    agent = agent_of(host)
    context = {
        "host": host,
        "form": form,
        "error": error,
        "has_instances": host.instances.exists(),
        "agent_live": agent is not None and not agent.is_missing(),
        "runs": PredeployRun.objects.filter(host=host).select_related("request", "instance")[:RECENT],
        "started": started,
        "poll_seconds": POLL_SECONDS,
    }
    return render(request, "diagnostics/predeploy/_host_panel.html", context)


@require_GET
@role_required(Role.VIEWER)
def run_status(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(PredeployRun.objects.select_related("request", "instance", "host"), pk=pk)
    return render(request, "diagnostics/predeploy/_run.html", {"run": run, "poll_seconds": POLL_SECONDS})
