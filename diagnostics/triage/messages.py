"""The texts of this area's YAML data that people read, for `manage.py makemessages`.

Not yet filled: see docs/i18n.md.
"""

from collections.abc import Iterator


def translatable_texts() -> Iterator[tuple[str, str]]:
    """Yield (text, where it is in the YAML) for each text shown to people."""
    yield from ()
