"""Validators for inventory fields: names, addresses, URLs and identifiers."""

from __future__ import annotations

import ipaddress
import re

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator, URLValidator
from django.utils.translation import gettext_lazy as _

NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,61}[a-z0-9])?$")
HOSTNAME_LABEL_RE = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$", re.IGNORECASE)

validate_name = RegexValidator(
    NAME_RE,
    _(
        "Use 1-63 lowercase letters, digits, dots, dashes or underscores, "
        "starting and ending with a letter or digit."
    ),
    code="invalid_name",
)

validate_env_var_name = RegexValidator(
    r"^[A-Z_][A-Z0-9_]*$",
    _("Give the name of an environment variable (like VLLM_API_KEY), never the key itself."),
    code="invalid_env_var",
)

validate_gpu_uuid = RegexValidator(
    r"^(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    _("Use the UUID that nvidia-smi -L prints, like GPU-5fd4c6e2-8f1b-4c1e-9a3d-2b7e0c9d1a44."),
    code="invalid_gpu_uuid",
)

validate_pci_bus_id = RegexValidator(
    r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$",
    _("Use the PCI bus id as nvidia-smi prints it, like 00000000:17:00.0."),
    code="invalid_pci_bus_id",
)

validate_http_url = URLValidator(schemes=["http", "https"], message=_("Enter an http:// or https:// URL."))


def validate_probe_target(value: str) -> None:
    """A URL the probes may fetch (fleet.target_policy): not the metadata service, a
    link-local address or the console itself, and without credentials. The name is
    resolved briefly here; the worker checks again at every connection."""
    from fleet.target_policy import refusal

    refused = refusal(value, resolve=True)
    if refused is not None:
        raise ValidationError(refused.translated(), code="refused_target")


def validate_address(value: str) -> None:
    """An address is an IPv4/IPv6 literal or a DNS host name (no scheme, no port)."""
    candidate = value.strip()
    try:
        ipaddress.ip_address(candidate)
        return
    except ValueError:
        pass
    labels = candidate.rstrip(".").split(".")
    if len(candidate) > 253 or not all(HOSTNAME_LABEL_RE.match(label) for label in labels):
        raise ValidationError(
            _("Enter an IP address or a host name, without scheme or port."),
            code="invalid_address",
        )
