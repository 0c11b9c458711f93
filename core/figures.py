"""Plotly figures as plain dicts and lists, for plotly.js to draw in the page (charts.js).

Building them as plain data costs a fraction of plotly.graph_objects (which validates and
deep-copies every value) and pio.to_json (which adds plotly.py's whole default template to
every figure). TEMPLATE is the part of that default template that the console's 2-D
charts use, so they look as they did: same colours, grid and background.
"""

from __future__ import annotations

import json
from typing import Any

from django.utils.safestring import SafeString, mark_safe

_INK = "#2a3f5f"
_PAPER = "#E5ECF6"
_AXIS = {
    "gridcolor": "white",
    "linecolor": "white",
    "ticks": "",
    "title": {"standoff": 15},
    "zerolinecolor": "white",
    "automargin": True,
    "zerolinewidth": 2,
}
_PATTERN = {"fillmode": "overlay", "size": 10, "solidity": 0.2}

# plotly.py's default template ("plotly"), reduced to the cartesian, bar and pie parts.
TEMPLATE: dict[str, Any] = {
    "data": {
        "scatter": [{"fillpattern": _PATTERN, "type": "scatter"}],
        "bar": [
            {
                "error_x": {"color": _INK},
                "error_y": {"color": _INK},
                "marker": {"line": {"color": _PAPER, "width": 0.5}, "pattern": _PATTERN},
                "type": "bar",
            }
        ],
        "pie": [{"automargin": True, "type": "pie"}],
    },
    "layout": {
        "autotypenumbers": "strict",
        "colorway": [
            "#636efa",
            "#EF553B",
            "#00cc96",
            "#ab63fa",
            "#FFA15A",
            "#19d3f3",
            "#FF6692",
            "#B6E880",
            "#FF97FF",
            "#FECB52",
        ],  # fmt: skip
        "font": {"color": _INK},
        "hovermode": "closest",
        "hoverlabel": {"align": "left"},
        "paper_bgcolor": "white",
        "plot_bgcolor": _PAPER,
        "xaxis": _AXIS,
        "yaxis": _AXIS,
        "shapedefaults": {"line": {"color": _INK}},
        "annotationdefaults": {"arrowcolor": _INK, "arrowhead": 0, "arrowwidth": 1},
        "title": {"x": 0.05},
    },
}


def figure(data: list[dict[str, Any]], **layout: Any) -> dict[str, Any]:
    """A figure as plotly.js takes it: {"data": traces, "layout": layout on TEMPLATE}."""
    return {"data": data, "layout": {"template": TEMPLATE, **layout}}


def axis(title: Any = None, **settings: Any) -> dict[str, Any]:
    """An axis with its title (plotly.js 3 reads a title as {"text": ...} only)."""
    return {"title": {"text": str(title)}, **settings} if title is not None else dict(settings)


def scatter(*, name: Any = None, **attributes: Any) -> dict[str, Any]:
    """A scatter trace (lines, markers or both: `mode`). x and y, or x0 and dx with y for
    points evenly spaced (on a date axis dx is in milliseconds)."""
    return _trace("scatter", name, attributes)


def bar(*, name: Any = None, **attributes: Any) -> dict[str, Any]:
    return _trace("bar", name, attributes)


def pie(*, name: Any = None, **attributes: Any) -> dict[str, Any]:
    return _trace("pie", name, attributes)


def _trace(kind: str, name: Any, attributes: dict[str, Any]) -> dict[str, Any]:
    trace = {"type": kind, **attributes}
    if name is not None:
        trace["name"] = str(name)  # a lazy translation is read now, in the request's language
    return trace


# A chart shows a value to a few pixels: four significant digits are more than it can draw,
# and the hover reads as plotly.js formats it anyway (12.35k).
_VALUE = "%.4g"
_MARK = "\ue000"  # a private-use character: stands for an array until the JSON is written
# As json_script escapes its JSON: nothing in it can close the <script> element around it.
_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}
_TEMPLATE_JSON = json.dumps(TEMPLATE, separators=(",", ":"))


class Written(list):
    """A trace's numbers with their JSON already written, a text a number (number_texts):
    to_json joins the texts instead of writing the numbers again."""

    def __init__(self, values: list, texts: list[str]) -> None:
        super().__init__(values)
        self.texts = texts


def number_texts(values: list[float | None]) -> list[str]:
    """Each number as JSON, to four significant digits; null for None, NaN or infinity."""
    try:
        return ["null" if v is None else _VALUE % v for v in values]
    except TypeError:
        return [json.dumps(v) for v in values]  # not only numbers: written as they are


def to_json(figure: dict[str, Any]) -> SafeString:
    """The figure as compact JSON to embed in a <script type="application/json"> (escaped as
    json_script escapes), its traces' y values to four significant digits: a fraction of
    json_script's size and time. The console's template is written once per process."""
    arrays: list[str] = []
    data = []
    for trace in figure["data"]:
        written = {k: _array(v, key=k) for k, v in trace.items() if k in ("x", "y")}
        written = {k: v for k, v in written.items() if v is not None}
        arrays += written.values()
        data.append(trace | dict.fromkeys(written, _MARK))
    layout = figure["layout"]
    if layout.get("template") is TEMPLATE:
        arrays.append(_TEMPLATE_JSON)
        layout = {**layout, "template": _MARK}
    text = json.dumps(
        {"data": data, "layout": layout}, separators=(",", ":"), ensure_ascii=False, default=str
    )
    if "<" in text or ">" in text or "&" in text:
        text = text.translate(_ESCAPES)
    parts = text.split(f'"{_MARK}"')
    out = [parts[0]]
    for array, part in zip(arrays, parts[1:], strict=True):
        out += (array, part)
    return mark_safe("".join(out))  # noqa: S308 - JSON escaped as json_script escapes it


def _array(values: Any, *, key: str) -> str | None:
    """A trace's values already written (Written), or its y numbers to four significant
    digits, as a JSON array; None for anything else (x as given, category names)."""
    if isinstance(values, Written):
        text = ",".join(values.texts)
    elif key == "y" and isinstance(values, list):
        try:
            text = ",".join(["null" if v is None else _VALUE % v for v in values])
        except TypeError:  # not numbers: category names
            return None
    else:
        return None
    if "a" in text or "f" in text:  # nan or inf, which JSON has no word for
        text = text.replace("-inf", "null").replace("inf", "null").replace("nan", "null")
    return f"[{text}]"
