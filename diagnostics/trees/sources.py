"""The troubleshooting guide the trees are built on, by section: a tree, a node or a
correction names the sections it follows in `source` ("2.2.4", or "A" for an appendix),
and pages show the section's title instead of a number that means nothing to a reader who
has not got the guide open. The one place that knows the titles."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

# The guide's headings, in English (the guide itself is written in Chinese).
SECTIONS: dict[str, Promise] = {
    "1.1": _("Background"),
    "1.2": _("What sets LLM serving apart"),
    "1.3": _("Where this applies"),
    "2.1": _("A taxonomy of errors"),
    "2.2": _("Timeout troubleshooting"),
    "2.2.1": _("Telling timeout types apart"),
    "2.2.2": _("Time to first token (TTFT) timeouts"),
    "2.2.3": _("Falling tokens per second"),
    "2.2.4": _("Connection timeouts"),
    "2.2.5": _("Tuning the timeouts"),
    "2.3": _("Rate-limit troubleshooting"),
    "2.3.1": _("HTTP 429 Too Many Requests"),
    "2.3.2": _("vLLM's internal queue limits"),
    "2.3.3": _("Rate limiting in nginx"),
    "2.3.4": _("How the token bucket works"),
    "2.3.5": _("Tuning rate limits"),
    "2.4": _("Out-of-memory troubleshooting"),
    "2.4.1": _("GPU out of memory"),
    "2.4.2": _("Host (CPU) out of memory"),
    "2.4.3": _("Container OOMKilled"),
    "2.4.4": _("OOM root causes at a glance"),
    "2.5": _("Other common errors"),
    "2.5.1": _("CUDA error: out of memory vs GPU OOM"),
    "2.5.2": _("CUDA error: device-side assert triggered"),
    "2.5.3": _("RuntimeError: NCCL communicator was aborted"),
    "2.5.4": _("Model loading failures"),
    "2.5.5": _("Handling torch.cuda.OutOfMemoryError"),
    "3.1": _("An OOM auto-recovery script"),
    "3.2": _("Rate-limit configuration templates"),
    "3.3": _("Timeout configuration"),
    "3.4": _("Case study: a production GPU OOM, end to end"),
    "3.5": _("Case study: intermittent timeouts traced to their root cause"),
    "4.1.1": _("Preventive configuration checklist"),
    "4.1.2": _("Scrubbing error messages"),
    "4.1.3": _("Self-healing"),
    "4.1.4": _("Graceful degradation"),
    "4.2.1": _("Common errors at a glance"),
    "5.1": _("Systematic troubleshooting decision tree"),
    "5.2": _("Log keywords quick reference"),
    "5.3": _("Monitoring metrics and alerts"),
    "5.3.1": _("Prometheus metrics"),
    "5.3.2": _("Prometheus alert rules"),
    "5.3.3": _("Grafana dashboard panels"),
    "A": _("Error quick reference"),
    "B": _("vLLM launch flags quick reference"),
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

    def __str__(self) -> str:
        return self.label


def section(number: str) -> Section:
    """The section with this number; KeyError for one the guide does not have."""
    if number not in SECTIONS:
        raise KeyError(number)
    return Section(number)
