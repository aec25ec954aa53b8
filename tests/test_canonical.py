"""tfcert.canonical writes what json.dumps(indent=1, ensure_ascii=False) writes, faster:
the bundle files' bytes are a contract, so the two must agree on every value."""
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfcert.canonical import dumps

KEYS = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.booleans(), st.none(),
                 st.floats(allow_nan=False, width=32))
LEAVES = st.one_of(st.text(max_size=8), st.integers(-10 ** 30, 10 ** 30), st.booleans(), st.none(),
                   st.floats(allow_nan=True, allow_infinity=True))
VALUES = st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.lists(inner, max_size=5).map(tuple),
    st.lists(st.one_of(st.text(max_size=4), st.integers()), max_size=6),  # the fast path: strings and ints
    st.dictionaries(KEYS, inner, max_size=5)), max_leaves=40)


def reference(value) -> bytes:
    return (json.dumps(value, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_the_bytes_are_json_dumps_with_indent_1(value):
    assert dumps(value) == reference(value)


def test_a_bundle_file_is_written_as_before():
    root = Path(__file__).resolve().parent.parent / "certificates"  # the committed example bundles
    files = sorted(p for name in ("model.json", "certificate.json")  # dataset.json holds the user's bytes
                   for p in root.glob(f"*/{name}"))
    assert files
    for path in files:
        raw = path.read_bytes()
        assert dumps(json.loads(raw)) == raw, path


def test_what_json_cannot_write_is_refused():
    with pytest.raises(TypeError):
        dumps({"a": object()})
    with pytest.raises(TypeError):
        dumps({(1, 2): 3})
