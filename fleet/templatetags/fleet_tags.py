import re

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from fleet import shown_state
from fleet.models import Gateway, Gpu, GpuHost, Instance

register = template.Library()


# The models' verbose names, translated (Instance's and Gateway's are Django's defaults).
KIND_NOUNS = {GpuHost: _("GPU host"), Gpu: _("GPU"), Instance: _("instance"), Gateway: _("gateway")}

# Where a change came in (ChangeLogEntry.source).
SOURCE_LABELS = {
    "web": pgettext_lazy("change source", "web"),
    "api": pgettext_lazy("change source", "api"),
    "import": pgettext_lazy("change source", "import"),
    "cli": pgettext_lazy("change source", "cli"),
}


@register.filter
def kind_label(obj) -> str:
    """What a host, GPU, instance or gateway is, in a list of things deleted with another."""
    for model, noun in KIND_NOUNS.items():
        if isinstance(obj, model):
            return str(noun)
    return str(obj._meta.verbose_name)


@register.filter
def state_label(state: str) -> str:
    return shown_state.state_label(state)


@register.filter
def source_label(source: str) -> str:
    return str(SOURCE_LABELS.get(source, source))


# Launch flags (--max-num-seqs) and bare URL schemes (http://), which stay as they are.
# A whole URL needs no marking: its dots and digits already make it an identifier.
_IDENTIFIER = re.compile(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*|https?://(?![\w\[]))")


@register.filter
def identifiers_kept(text) -> SafeString:
    """The text escaped, its launch flags and URL schemes marked as identifiers to keep."""
    escaped = str(conditional_escape(text))
    return mark_safe(_IDENTIFIER.sub(r'<span translate="no">\1</span>', escaped))  # noqa: S308 (escaped above)


@register.filter
def get_item(mapping, key):
    return mapping.get(key)
