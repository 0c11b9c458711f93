"""The probe tests' fixtures (quick probe settings, the real simulator) for walkthroughs
started from an instance."""

from tests.fleet.conftest import quick_settings, simulator  # noqa: F401
