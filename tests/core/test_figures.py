"""Figures as plain data: the console's template (plotly's default look), axis titles as
plotly.js 3 reads them, trace names read in the request's language."""

import json

from django.utils import translation
from django.utils.translation import gettext_lazy

from core import figures


def test_a_figure_is_its_traces_on_the_consoles_template():
    line = figures.scatter(name="p95", x=[1, 2], y=[3.0, None], mode="lines")
    figure = figures.figure([line], height=220, yaxis=figures.axis("seconds (s)"))
    assert figure == {
        "data": [{"type": "scatter", "name": "p95", "x": [1, 2], "y": [3.0, None], "mode": "lines"}],
        "layout": {"template": figures.TEMPLATE, "height": 220, "yaxis": {"title": {"text": "seconds (s)"}}},
    }
    assert figures.TEMPLATE["layout"]["colorway"][:2] == ["#636efa", "#EF553B"]  # plotly's own colours


def test_a_lazy_name_or_title_is_read_in_the_requests_language():
    with translation.override("zh-hans"):
        bar = figures.bar(name=gettext_lazy("total"), x=[1])
        axis = figures.axis(gettext_lazy("seconds (s)"), type="log")
    assert bar["name"] != "total" and isinstance(bar["name"], str)
    assert axis["type"] == "log" and isinstance(axis["title"]["text"], str)
    assert figures.axis(range=[0, 100]) == {"range": [0, 100]}


def test_a_figure_is_written_as_compact_json_that_cannot_close_its_script_element():
    line = figures.scatter(name="</script><b>", x=[1, 2, 3], y=[0.123456, None, float("nan")])
    text = figures.to_json(figures.figure([line], yaxis=figures.axis("tokens/s")))
    assert "<" not in text and ">" not in text and ", " not in text
    figure = json.loads(text)
    assert figure["data"][0] == {
        "type": "scatter",
        "x": [1, 2, 3],
        "y": [0.1235, None, None],  # four significant digits; JSON has no NaN
        "name": "</script><b>",
    }
    assert figure["layout"]["template"] == json.loads(json.dumps(figures.TEMPLATE))


def test_numbers_written_once_are_not_written_again():
    values = figures.Written([1.0, None], ["1", "null"])
    line = figures.bar(name=gettext_lazy("total"), x=["a", "b"], y=values)
    assert json.loads(figures.to_json(figures.figure([line])))["data"][0]["y"] == [1, None]
    assert figures.number_texts([12345.678, None, 0.5]) == ["1.235e+04", "null", "0.5"]
