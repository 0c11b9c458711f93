from __future__ import annotations

from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from fleet.models.instances import Instance
from fleet.validators import validate_http_url, validate_name, validate_probe_target


class GatewayKind(models.TextChoices):
    NGINX = "nginx", "nginx"
    ENVOY = "envoy", "Envoy"
    KONG = "kong", "Kong"


class Gateway(models.Model):
    # What people edit through the forms and the API, in the order the forms show it.
    EDITABLE_FIELDS = (
        "name",
        "kind",
        "url",
        "instances",
        "notes",
    )

    name = models.CharField(max_length=63, unique=True, validators=[validate_name])
    kind = models.CharField(max_length=16, choices=GatewayKind.choices, default=GatewayKind.NGINX)
    url = models.CharField(
        _("URL"),
        max_length=300,
        validators=[validate_http_url, validate_probe_target],
        help_text=_("The URL clients call, like https://llm.example.com."),
    )
    instances = models.ManyToManyField(Instance, blank=True, related_name="gateways")
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("gateway")
        verbose_name_plural = _("gateways")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("fleet:gateway-detail", args=[self.pk])

    def clean(self) -> None:
        if self.url:
            self.url = self.url.rstrip("/")
