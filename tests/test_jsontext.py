"""kvplan.render.jsontext writes the text ``json.dumps(doc, indent=2, allow_nan=False)`` writes (the standard
library is the independent reference here), without importing ``json`` on the ``-f json`` path."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import _modules_loaded  # tests/ is on sys.path

from kvplan.render.jsontext import dumps

GOLDEN = Path(__file__).parent / "golden"


def reference(doc) -> str:
    return json.dumps(doc, indent=2, allow_nan=False)


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json.txt")), ids=lambda p: p.name)
def test_every_golden_json_document_is_written_as_json_dumps_writes_it(path):
    doc = json.loads(path.read_text())
    assert dumps(doc) == reference(doc)


@pytest.mark.parametrize("doc, text", [
    # by hand, RFC 8259 with json.dumps's defaults: ASCII escapes, lowercase hex, a surrogate pair above U+FFFF
    ("é", '"\\u00e9"'), ("\U0001F600", '"\\ud83d\\ude00"'), ("a\"b\\c", '"a\\"b\\\\c"'),
    ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'), ("\x00\x1f\x7f", '"\\u0000\\u001f\\u007f"'), ("~ ", '"~ "'),
    ([], "[]"), ({}, "{}"), ((1, 2), "[\n  1,\n  2\n]"),
    ({"a": [True, None]}, '{\n  "a": [\n    true,\n    null\n  ]\n}'),
    ({1: 0.1, 2.5: -0.0, False: 1e16, None: 1e-05},
     '{\n  "1": 0.1,\n  "2.5": -0.0,\n  "false": 1e+16,\n  "null": 1e-05\n}'),
    ({"x": {"y": {}}, "z": ["é", 3]}, '{\n  "x": {\n    "y": {}\n  },\n  "z": [\n    "\\u00e9",\n    3\n  ]\n}'),
])
def test_figures_worked_by_hand(doc, text):
    assert dumps(doc) == text == reference(doc)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, [1, {"a": math.nan}], {math.inf: 1}])
def test_out_of_range_floats_are_refused_as_json_dumps_refuses_them(bad):
    with pytest.raises(ValueError):
        reference(bad)
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps(bad)


@pytest.mark.parametrize("bad", [object(), {"a": {1, 2}}, {(1, 2): 3}, b"bytes"])
def test_what_json_cannot_write_is_refused(bad):
    with pytest.raises(TypeError):
        reference(bad)
    with pytest.raises(TypeError):
        dumps(bad)


scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
           | st.text())
keys = st.text() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.booleans() | st.none()
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                         | st.dictionaries(keys, inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_any_document_is_written_as_json_dumps_writes_it(doc):
    assert dumps(doc) == reference(doc)


def test_json_output_does_not_import_json():
    # the -f json path's start-up: no json package (its decoder and scanner compile regexes at import)
    assert _modules_loaded(["size"], ("json", "json.decoder", "json.scanner")) == []
    assert _modules_loaded(["concurrency"], ("json",)) == []
