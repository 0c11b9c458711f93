"""Serve front-end assets that ship inside Python packages, so nothing comes from a CDN.

htmx comes from django-htmx (`{% htmx_script %}`); plotly.js from the plotly package,
whose version therefore always matches the figures the Python side builds.
"""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

VENDORED = {
    "vendor/plotly.min.js": Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
}


class VendorFinder(BaseFinder):
    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        source = VENDORED.get(path)
        if source is None or not source.exists():
            return [] if find_all else None
        return [str(source)] if find_all else str(source)

    def list(self, ignore_patterns):
        for name, source in VENDORED.items():
            storage = FileSystemStorage(location=str(source.parent))
            storage.prefix = str(Path(name).parent)
            yield source.name, storage
