"""An import of a malformed file ends with errors that name the line (and the column where
the parser knows it) or the field, and changes nothing: never an exception, never a partial
write."""

import io
from textwrap import dedent

import pytest
from django.core.management import CommandError, call_command

from fleet.inventory_io import UnreadableFile, plan_import, text_of
from fleet.inventory_io import parse_yaml as parse_yaml_module
from fleet.inventory_io.parse_yaml import parse_yaml
from fleet.inventory_io.plan import MAX_ERRORS, MAX_RECORDS
from fleet.models import ChangeLogEntry, GpuHost
from tests.hang import ends

pytestmark = pytest.mark.django_db


def _messages(text: str, fmt: str = "yaml") -> list[str]:
    return [str(error) for error in plan_import(text=text, fmt=fmt).errors]


def _yaml(text: str) -> str:
    return dedent(text).lstrip()


# Characters and encodings


def test_a_control_character_in_yaml_is_an_error_naming_its_line_and_column():
    # Found by fuzzing: PyYAML's reader refused it before the parser's error handling began.
    assert _messages("hosts:\n  - name: a\x11b\n") == [
        "line 2: Column 12 holds the character U+0011, which an inventory may not hold."
    ]


def test_the_yaml_reader_names_a_control_character_s_line_when_called_on_its_own():
    records, errors = parse_yaml(text="hosts:\n  - name: a\x11b\n")
    assert records == []
    assert [(e.line, str(e.message)) for e in errors] == [
        (2, "Column 12 holds the character U+0011, which an inventory may not hold.")
    ]


@pytest.mark.parametrize(
    ("text", "fmt", "character"),
    [
        ("kind,name,address\nhost,a\x00b,10.0.0.1\n", "csv", "U+0000"),
        ("kind,name,address\nhost,ab,10.0.0.1\x1b\n", "csv", "U+001B"),
        ("hosts:\n  - {name: a\udcffb, address: 10.0.0.1}\n", "yaml", "U+DCFF"),
    ],
)
def test_nul_control_characters_and_lone_surrogates_are_refused_in_either_format(text, fmt, character):
    (message,) = _messages(text, fmt)
    assert message.startswith("line 2: Column ") and character in message


def test_each_line_with_such_a_character_is_named_up_to_a_bound():
    messages = _messages("hosts:\n" + "  - name: a\x00\x00\n" * 50)
    assert len(messages) == 21
    assert messages[0].startswith("line 2: Column 12") and messages[19].startswith("line 21:")
    assert messages[-1] == "line 22: More lines hold such characters."


def test_a_yaml_escape_that_makes_a_control_character_is_refused_for_its_field():
    messages = _messages('hosts:\n  - {name: "a\\0b", address: 10.0.0.1}\n')
    assert messages == [
        "line 2: host a\x00b: name: The text holds the character U+0000, which an inventory may not hold."
    ]


def test_an_upload_that_is_not_utf8_names_the_line_and_column_of_the_first_bad_byte():
    with pytest.raises(UnreadableFile) as refused:
        text_of(b"hosts:\n  - name: caf\xe9\n")
    assert str(refused.value) == (
        "Line 2, column 14: the file is not UTF-8 text (byte 0xE9); save it as UTF-8."
    )


def test_a_utf16_upload_is_refused_and_a_utf8_byte_order_mark_is_read_through():
    with pytest.raises(UnreadableFile, match="UTF-16"):
        text_of("hosts: []\n".encode("utf-16"))
    assert text_of(b"\xef\xbb\xbfhosts: []\n") == "hosts: []\n"


# YAML's own errors, located


def test_a_tab_used_for_indentation_names_its_line_and_column():
    assert _messages("hosts:\n\t- name: a\n") == [
        "line 2: Malformed YAML at column 1: found character '\\t' that cannot start any token."
    ]


def test_a_second_document_in_the_file_is_an_error_on_its_line():
    assert _messages("hosts: []\n---\ngpus: []\n") == [
        "line 2: Malformed YAML at column 1: expected a single document in the stream; "
        "but found another document."
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-13-45", "month must be in 1..12"),
        ("9" * 5000, "Exceeds the limit (4300 digits)"),
    ],
)
def test_a_value_yaml_cannot_make_is_an_error_at_its_line_and_column(value, expected):
    (message,) = _messages(f"hosts:\n  - name: a\n    cpu_cores: {value}\n")
    assert message.startswith("line 3: Malformed YAML at column 16: cannot read the value: ")
    assert expected in message


def test_collections_nested_past_the_bound_are_refused_where_they_cross_it():
    assert _messages("hosts: " + "[" * 5000 + "]" * 5000) == [
        "line 1: Malformed YAML at column 39: collections nested more than 32 deep."
    ]


def test_a_billion_laughs_document_is_refused_at_the_alias_that_crosses_the_bound_and_quickly():
    laughs = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for n, name in enumerate("bcdefghi"):
        previous = "abcdefghi"[n]
        laughs.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    text = "\n".join(laughs) + "\nhosts: [{name: *i, address: 10.0.0.1}]\n"
    records, errors = ends(parse_yaml, text=text)
    assert records == []
    assert [str(e) for e in errors] == [
        "line 6: Malformed YAML at column 8: aliases repeat more than 100,000 values."
    ]


def test_an_alias_inside_the_collection_it_names_is_refused():
    assert _messages("hosts: &h [{name: a, address: 10.0.0.1, tags: *h}]\n") == [
        "line 1: Malformed YAML at column 47: an alias inside the collection it refers to."
    ]


def test_anchors_and_merge_keys_for_shared_fields_still_import():
    plan = plan_import(
        text=_yaml("""
        hosts:
          - &first {name: gpu-a100-01, address: 10.0.0.1, datacenter: fra1, rack: r04}
          - {<<: *first, name: gpu-a100-02, address: 10.0.0.2}
    """),
        fmt="yaml",
    )
    assert plan.ok and plan.counts["create"] == 2
    assert [(r.values["datacenter"], r.values["rack"]) for r in plan.records] == [("fra1", "r04")] * 2


# Wrong types, anywhere


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- hosts\n", ["line 1: The file must be a mapping of hosts, gpus, instances, gateways."]),
        ("hosts: 3\n", ["line 1: hosts: Give a list of mappings."]),
        ("hosts: [[name, a]]\n", ["line 1: hosts: Item 1 is not a mapping."]),
        (
            "hosts:\n  - {name: a, address: 10.0.0.1, tags: {x: [1]}}\n",
            ["line 2: host a: tags: Give a list."],
        ),
        (
            "hosts:\n  - {name: a, address: 10.0.0.1, tags: [[1, 2]]}\n",
            ["line 2: host a: tags: [1, 2] is not text."],
        ),
        (
            "hosts:\n  - {name: a, address: 10.0.0.1, cpu_cores: [1]}\n",
            ["line 2: host a: cpu_cores: “[1]” value must be an integer."],
        ),
        (
            "hosts:\n  - {name: a, address: 10.0.0.1, drill: {}}\n",
            ["line 2: host a: drill: {} is not true or false."],
        ),
    ],
)
def test_a_value_of_the_wrong_type_at_any_depth_names_its_line_and_field(text, expected):
    assert _messages(text) == expected


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_number_that_is_not_finite_is_refused(value):
    host = "hosts:\n  - {name: gpu-a100-01, address: 10.0.0.1}\n"
    gpus = "gpus:\n  - {host: gpu-a100-01, index: 0, model: a100-sxm4-80gb, form_factor: sxm}\n"
    instance = (
        "instances:\n  - {name: vllm-a, host: gpu-a100-01, gpus: [0], base_url: 'http://10.0.0.1:8000', "
        f"served_model_name: m, gpu_memory_utilization: {value}}}\n"
    )
    (message,) = _messages(host + gpus + instance)
    assert message.startswith("line 6: instance vllm-a: gpu_memory_utilization: ")
    assert "is not a valid floating point number." in message


def test_a_long_value_is_quoted_cut_short_in_its_error():
    (message,) = _messages("hosts:\n  - {name: a, address: 10.0.0.1, drill: " + "x" * 10_000 + "}\n")
    assert message == "line 2: host a: drill: '" + "x" * 78 + "… is not true or false."


# CSV


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('kind,name,address\nhost,"a,10.0.0.1\n', "line 2: Malformed CSV: unexpected end of data."),
        ("kind,name,address\nhost,a,10.0.0.1,x,y\n", "line 2: The row has 5 cells but the header has 3."),
        (
            "kind,name,address\nhost,a," + "1" * 200_000 + "\n",
            "line 2: Malformed CSV: field larger than field limit (131072).",
        ),
        (
            "kind,name,address\nrouter,a,10.0.0.1\n",
            "line 2: kind: Unknown kind 'router'; use host, gpu, instance, gateway.",
        ),
    ],
)
def test_malformed_csv_names_its_line(text, expected):
    assert _messages(text, "csv") == [expected]


# Size


def test_a_file_of_more_objects_than_one_import_takes_is_refused_at_the_first_one_past_the_bound():
    rows = "".join(f"host,h{i},10.0.0.1\n" for i in range(MAX_RECORDS + 5))
    messages = _messages("kind,name,address\n" + rows, "csv")
    assert messages == [
        f"line {MAX_RECORDS + 2}: The file holds 20,005 objects; import at most 20,000 at a time."
    ]


def test_a_file_with_more_errors_than_a_page_shows_lists_the_first_and_counts_the_rest():
    messages = _messages("kind,name,address\n" + "router,a,b\n" * (MAX_ERRORS + 50), "csv")
    assert len(messages) == MAX_ERRORS + 1
    assert messages[-1] == f"line {MAX_ERRORS + 1}: 50 more errors after this line."


def test_a_yaml_file_of_more_values_than_any_inventory_holds_is_refused_at_the_line_crossing_the_bound(
    monkeypatch,
):
    monkeypatch.setattr(parse_yaml_module, "MAX_NODES", 1000)  # as 600,000, but quicker to reach
    text = "hosts:\n" + "  - {name: a, tags: [x, y]}\n" * 200
    assert _messages(text) == [
        "line 145: Malformed YAML at column 5: more than 1,000 values; import the file in parts."
    ]


# Nothing written


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("hosts:\n  - {name: gpu-a100-01, address: 10.0.0.1}\n  - name: a\x11b\n", "yaml"),
        ("kind,name,address\nhost,gpu-a100-01,10.0.0.1\nhost,b\x00,10.0.0.2\n", "csv"),
        (
            'hosts:\n  - {name: gpu-a100-01, address: 10.0.0.1}\n  - {name: "b\\0", address: 10.0.0.2}\n',
            "yaml",
        ),
    ],
)
def test_a_file_with_a_bad_line_imports_none_of_its_good_ones(text, fmt, tmp_path):
    source = tmp_path / f"fleet.{fmt}"
    source.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    err = io.StringIO()
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("fleet", "import", str(source), stdout=io.StringIO(), stderr=err)
    assert "line 3" in err.getvalue()
    assert not GpuHost.objects.exists() and not ChangeLogEntry.objects.exists()


def test_the_import_command_names_the_line_of_a_byte_that_is_not_utf8(tmp_path):
    source = tmp_path / "fleet.yaml"
    source.write_bytes(b"hosts:\n  - {name: gpu-a100-01, address: 10.0.0.\xff}\n")
    with pytest.raises(CommandError, match=r"Line 2, column 41: the file is not UTF-8 text \(byte 0xFF\)"):
        call_command("fleet", "import", str(source), stdout=io.StringIO(), stderr=io.StringIO())
    assert not GpuHost.objects.exists()


def test_a_url_that_cannot_be_split_is_an_error_on_its_field():
    # Found by fuzzing: urlsplit's ValueError escaped the probe-target check of the URL.
    text = _yaml("""
        hosts:
          - {name: gpu-a100-01, address: 10.0.0.1}
        gateways:
          - {name: gw, kind: nginx, url: "http://[10.0.0.1:8080"}
    """)
    (message,) = _messages(text)
    assert message == "line 4: gateway gw: url: Enter an http:// or https:// URL."
