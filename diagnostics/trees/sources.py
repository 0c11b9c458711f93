"""The troubleshooting guide the trees are built on, by section: a tree, a node or a
correction names the sections it follows in `source` ("2.2.4", or "A" for an appendix),
and pages show the section's title instead of a number that means nothing to a reader who
has not got the guide open. The one place that knows the titles."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.functional import Promise
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language, pgettext_lazy
from django.utils.translation import gettext_lazy as _

# The guide's headings, in English (the guide itself is written in Chinese); the Chinese
# catalogue gives the guide's own headings, word for word. Their own context, as some are
# also texts of the trees that the catalogue translates otherwise.
SECTIONS: dict[str, Promise] = {
    "1.1": pgettext_lazy("guide section", "Background"),
    "1.2": pgettext_lazy("guide section", "What sets LLM serving apart"),
    "1.3": pgettext_lazy("guide section", "Where this applies"),
    "2.1": pgettext_lazy("guide section", "A taxonomy of errors"),
    "2.2": pgettext_lazy("guide section", "Timeout troubleshooting"),
    "2.2.1": pgettext_lazy("guide section", "Telling timeout types apart"),
    "2.2.2": pgettext_lazy("guide section", "Time to first token (TTFT) timeouts"),
    "2.2.3": pgettext_lazy("guide section", "Falling tokens per second"),
    "2.2.4": pgettext_lazy("guide section", "Connection timeouts"),
    "2.2.5": pgettext_lazy("guide section", "Tuning the timeouts"),
    "2.3": pgettext_lazy("guide section", "Rate-limit troubleshooting"),
    "2.3.1": pgettext_lazy("guide section", "HTTP 429 Too Many Requests"),
    "2.3.2": pgettext_lazy("guide section", "vLLM's internal queue limits"),
    "2.3.3": pgettext_lazy("guide section", "Rate limiting in nginx"),
    "2.3.4": pgettext_lazy("guide section", "How the token bucket works"),
    "2.3.5": pgettext_lazy("guide section", "Tuning rate limits"),
    "2.4": pgettext_lazy("guide section", "Out-of-memory troubleshooting"),
    "2.4.1": pgettext_lazy("guide section", "GPU out of memory"),
    "2.4.2": pgettext_lazy("guide section", "Host (CPU) out of memory"),
    "2.4.3": pgettext_lazy("guide section", "Container OOMKilled"),
    "2.4.4": pgettext_lazy("guide section", "OOM root causes at a glance"),
    "2.5": pgettext_lazy("guide section", "Other common errors"),
    "2.5.1": pgettext_lazy("guide section", "CUDA error: out of memory vs GPU OOM"),
    "2.5.2": pgettext_lazy("guide section", "CUDA error: device-side assert triggered"),
    "2.5.3": pgettext_lazy("guide section", "RuntimeError: NCCL communicator was aborted"),
    "2.5.4": pgettext_lazy("guide section", "Model loading failures"),
    "2.5.5": pgettext_lazy("guide section", "Handling torch.cuda.OutOfMemoryError"),
    "3.1": pgettext_lazy("guide section", "An OOM auto-recovery script"),
    "3.2": pgettext_lazy("guide section", "Rate-limit configuration templates"),
    "3.3": pgettext_lazy("guide section", "Timeout configuration"),
    "3.4": pgettext_lazy("guide section", "Case study: a production GPU OOM, end to end"),
    "3.5": pgettext_lazy("guide section", "Case study: intermittent timeouts traced to their root cause"),
    "4.1.1": pgettext_lazy("guide section", "Preventive configuration checklist"),
    "4.1.2": pgettext_lazy("guide section", "Scrubbing error messages"),
    "4.1.3": pgettext_lazy("guide section", "Self-healing"),
    "4.1.4": pgettext_lazy("guide section", "Graceful degradation"),
    "4.2.1": pgettext_lazy("guide section", "Common errors at a glance"),
    "5.1": pgettext_lazy("guide section", "Systematic troubleshooting decision tree"),
    "5.2": pgettext_lazy("guide section", "Log keywords quick reference"),
    "5.3": pgettext_lazy("guide section", "Monitoring metrics and alerts"),
    "5.3.1": pgettext_lazy("guide section", "Prometheus metrics"),
    "5.3.2": pgettext_lazy("guide section", "Prometheus alert rules"),
    "5.3.3": pgettext_lazy("guide section", "Grafana dashboard panels"),
    "A": pgettext_lazy("guide section", "Error quick reference"),
    "B": pgettext_lazy("guide section", "vLLM launch flags quick reference"),
}


@dataclass(frozen=True)
class Section:
    number: str

    @property
    def title(self) -> str:
        return str(SECTIONS[self.number])

    @property
    def label(self) -> str:
        """'Guide §2.2.4 — Connection timeouts', or 'Guide appendix A — …'."""
        if self.number.isalpha():
            return _("Guide appendix %(number)s — %(title)s") % {"number": self.number, "title": self.title}
        return _("Guide §%(number)s — %(title)s") % {"number": self.number, "title": self.title}

    @property
    def quotes_the_guide(self) -> bool:
        """Whether the title shown is the guide's own heading (in Chinese, the guide's language)
        rather than the English translation of it."""
        return not (get_language() or "en").startswith("en")

    @property
    def label_html(self) -> SafeString:
        """The label as HTML. A heading quoted from the guide keeps the English the guide
        itself writes in it (error messages, terms); those runs are marked translate="no"."""
        label = escape(self.label)
        if not self.quotes_the_guide:
            return mark_safe(label)  # noqa: S308 - escaped
        title = escape(self.title)
        quoted = _LATIN.sub(lambda m: f'<span translate="no">{m.group(0)}</span>', title)
        return mark_safe(label.replace(title, quoted, 1))  # noqa: S308 - escaped

    def __str__(self) -> str:
        return self.label


_LATIN = re.compile(r"[A-Za-z][A-Za-z0-9 .:_-]*[A-Za-z0-9]")


def section(number: str) -> Section:
    """The section with this number; KeyError for one the guide does not have."""
    if number not in SECTIONS:
        raise KeyError(number)
    return Section(number)
