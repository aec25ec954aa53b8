"""Fuzzing every reader (dataset, model, certificate) with hypothesis:
random bytes, random JSON, valid documents with one subtree replaced, a key
added or removed, or one byte changed. The checker answers with a report or
an InputError (exit 2, one ``error:`` line) — never another exception, never
a hang.

CI runs TFCERT_FUZZ_EXAMPLES (default 150) examples per test; the large run
is ``TFCERT_FUZZ_EXAMPLES=25000 python -m pytest tests/test_fuzz.py``
(4 fuzz tests: 100,000 inputs)."""
from __future__ import annotations

import copy
import json
import os
import time

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfcert.construct.bundle import build
from tfcert.errors import InputError
from tfcert.verify.check import check_certificate
from tfcert.verify.formats import parse_document, read_dataset, read_model

EXAMPLES = int(os.environ.get("TFCERT_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
SECONDS = 10  # no input may take longer

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats() | st.text(max_size=12)
    | st.sampled_from(["1/2", "0", "1e4000", "-3", "hardmax", "softmax", "tfcert.model/1", "tfcert.dataset/1",
                       "tfcert.certificate/1", "hat", "exact", "size", "1.6"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["format", "d", "pairs", "input", "output", "blocks", "ff", "sa", "kind", "block", "units",
                         "phases", "claims", "name", "x"]) | st.text(max_size=6), inner, max_size=4),
    max_leaves=24)


@pytest.fixture(scope="module")
def bases() -> dict[str, dict[str, bytes]]:
    demo = REPO / "tfcert" / "examples" / "demo.json"
    return {attention: dict(build(demo, attention).files) for attention in ("hardmax", "softmax")}


def outcome(files: dict[str, bytes]) -> str:
    """Run the readers and the checker; only a report or an InputError may come out."""
    start = time.perf_counter()
    try:
        docs = [parse_document(name, files[name]) for name in ("model.json", "dataset.json", "certificate.json")]
        read_dataset(docs[1])
        read_model(docs[0])
        result = "ok" if check_certificate(*docs).ok else "fails"
    except InputError as exc:
        message = str(exc)
        assert "\n" not in message and message.split(":")[0] in ("model.json", "dataset.json", "certificate.json")
        result = "refused"
    assert time.perf_counter() - start < SECONDS
    return result


def assert_outcome(files: dict[str, bytes], base: dict[str, bytes], which: str) -> str:
    """The outcome, and what it must be: the certificate states the sha256 of the model's and the
    dataset's exact bytes, so a change to either never verifies; a file left as it was verifies;
    a changed certificate may still hold (a claim deleted) or not."""
    result = outcome(files)
    if files[which] == base[which]:
        assert result == "ok"
    elif which != "certificate.json":
        assert result != "ok", which
    return result


def paths(value, path=()):
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        yield from paths(v, path + (k,))


FILES = ["model.json", "dataset.json", "certificate.json"]


@pytest.mark.slow
@FUZZ
@given(which=st.sampled_from(FILES), attention=st.sampled_from(["hardmax", "softmax"]), data=st.binary(max_size=300))
def test_random_bytes(which, attention, data, bases):
    """Random bytes hold neither a tfcert file nor, in a certificate, the two sha256 it must state."""
    files = {**bases[attention], which: data}
    assert assert_outcome(files, bases[attention], which) != "ok" or files[which] == bases[attention][which]


@FUZZ
@given(which=st.sampled_from(FILES), attention=st.sampled_from(["hardmax", "softmax"]), value=JSON)
def test_random_json(which, attention, value, bases):
    """Random JSON (strings of at most 12 characters) cannot state a certificate's sha256."""
    assert assert_outcome({**bases[attention], which: json.dumps(value).encode()}, bases[attention], which) != "ok"


@pytest.mark.slow
@FUZZ
@given(which=st.sampled_from(FILES), attention=st.sampled_from(["hardmax", "softmax"]), data=st.data())
def test_one_subtree_replaced(which, attention, data, bases):
    """A valid file with one node replaced by random JSON, deleted, or given a new key."""
    value = json.loads(bases[attention][which])
    path = data.draw(st.sampled_from(list(paths(value))[1:]), label="path")
    parent = value
    for p in path[:-1]:
        parent = parent[p]
    how = data.draw(st.sampled_from(["replace", "delete", "add-key"]), label="how")
    if how == "replace":
        parent[path[-1]] = data.draw(JSON, label="value")
    elif how == "delete":
        del parent[path[-1]]
    elif isinstance(parent[path[-1]], dict):
        parent[path[-1]][data.draw(st.text(max_size=8), label="key")] = data.draw(JSON, label="value")
    assert_outcome({**bases[attention], which: json.dumps(value).encode()}, bases[attention], which)


@pytest.mark.slow
@FUZZ
@given(which=st.sampled_from(FILES), attention=st.sampled_from(["hardmax", "softmax"]), data=st.data())
def test_one_byte_changed(which, attention, data, bases):
    raw = bytearray(bases[attention][which])
    i = data.draw(st.integers(0, len(raw) - 1), label="at")
    how = data.draw(st.sampled_from(["set", "insert", "delete"]), label="how")
    byte = data.draw(st.integers(0, 255), label="byte")
    if how == "set":
        raw[i] = byte
    elif how == "insert":
        raw.insert(i, byte)
    else:
        del raw[i]
    assert_outcome({**bases[attention], which: bytes(raw)}, bases[attention], which)


def test_outcomes_are_seen_both_ways(bases):
    """The fuzz helpers can tell a verifying bundle from a refused one."""
    assert outcome(bases["hardmax"]) == outcome(bases["softmax"]) == "ok"
    broken = copy.deepcopy(bases["hardmax"])
    broken["model.json"] = b"{"
    assert outcome(broken) == "refused"
