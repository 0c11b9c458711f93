"""Messages kept to be shown later: English for logs, the API and stored text whatever the
active language, and the reader's language when shown."""

from django.utils import translation

from core.i18n import Message, later, shown
from diagnostics.sizing import catalog
from diagnostics.sizing.calculator import SizingSpec, size
from fleet import gpu_catalog


def _messages(value):
    if isinstance(value, Message):
        yield value
        for param in value.params.values():
            yield from _messages(param)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _messages(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _messages(item)


def test_a_message_reads_in_english_while_chinese_is_active_and_in_chinese_when_shown():
    message = later("Memory vLLM requests per GPU")
    with translation.override("zh-hans"):
        assert str(message) == "Memory vLLM requests per GPU"
        assert shown(message) != "Memory vLLM requests per GPU"
        assert translation.get_language() == "zh-hans"  # reading English left the language alone


def test_english_fills_in_values_that_are_messages_themselves():
    inner = later("average context under 2K tokens")
    message = later("%(label)s (%(why)s)", label="Short chat", why=inner)
    with translation.override("zh-hans"):
        assert message.english() == "Short chat (average context under 2K tokens)"


def test_english_is_what_django_finds_in_english_for_every_message_of_a_sizing():
    """English is the msgid filled in: the same text as gettext with English active."""
    sizing = size(
        SizingSpec(arch=catalog.shipped()[0].architecture(), gpu=gpu_catalog.get("l4"), max_model_len=8192)
    )
    found = list(_messages([sizing.figures, sizing.notes, sizing.recommendations, sizing.kv.notes]))
    found += [figure.label for figure in sizing.figures if isinstance(figure.label, Message)]
    assert len(found) > 10
    with translation.override("zh-hans"):
        for message in found:
            english = message.english()
            with translation.override("en"):
                assert english == message.translated(), message.msgid
