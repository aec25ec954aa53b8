"""Bad input (docs/certificates.md, Limits): every command that reads a file answers
bad input with exactly one ``error: …`` line on stderr naming the file and the
JSON path, exit code 2, no traceback, nothing on stdout and nothing
half-written. Also: exact number reading."""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import REPO, dataset_json, run, write_json
from flint import fmpq, fmpz
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfcert.construct.bundle import build
from tfcert.errors import InputError
from tfcert.verify.formats import parse_document, read_dataset
from tfcert.verify.numbers import fmt, parse_number

BUNDLE_FILES = ("dataset.json", "model.json", "certificate.json")
FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


# ---------------------------------------------------------------- helpers

@pytest.fixture(scope="module")
def bundle_values():
    """The demo bundle as JSON values (dataset, model, certificate)."""
    demo = Path(__file__).resolve().parent.parent / "tfcert" / "examples" / "demo.json"
    b = build(demo)
    return {name: json.loads(data) for name, data in b.files.items()}


def assert_input_error(rc: int, out: str, err: str, file: str | Path | None, path: bool = True) -> str:
    """Exit 2, one ``error:`` line on stderr naming ``file`` (and a JSON path),
    nothing on stdout. Returns the line."""
    assert rc == 2, (rc, out, err)
    assert out == "", out
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("error: "), line
    assert "Traceback" not in err
    if file is not None:
        assert Path(file).name in line, line
    if path:
        assert ": $" in line, line
    return line


def write_raw(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return path


def construct_fails(ds: Path, tmp_path: Path, capsys, path: bool = True, extra=()) -> str:
    """``tfcert construct ds -o DIR`` is an input error and DIR gets no bundle file."""
    out_dir = tmp_path / "bundle-out"
    rc, out, err = run(["construct", ds, "-o", out_dir, *extra], capsys)
    line = assert_input_error(rc, out, err, ds, path)
    if out_dir.exists():
        assert not any((out_dir / f).exists() for f in BUNDLE_FILES), sorted(os.listdir(out_dir))
    return line


def write_bundle(tmp_path: Path, values: dict, **raw: str | bytes) -> dict[str, Path]:
    """Write the bundle; ``raw`` overrides a file's text (key: dataset/model/certificate)."""
    d = tmp_path / "b"
    d.mkdir(exist_ok=True)
    paths = {}
    for name in BUNDLE_FILES:
        key = name.split(".")[0]
        text = raw.get(key)
        p = d / name
        if text is None:
            write_json(p, values[name])
        else:
            write_raw(p, text)
        paths[key] = p
    return paths


def verify_argv(paths: dict[str, Path]) -> list:
    return ["verify", "--model", paths["model"], "--dataset", paths["dataset"], "--certificate", paths["certificate"]]


def audit_argv(paths: dict[str, Path]) -> list:
    return ["audit", "--model", paths["model"], "--dataset", paths["dataset"]]


def ok_dataset() -> dict:
    return dataset_json(2, [([(1, 0), (0, 1), (2, 3)], [(3, 1)]), ([(1, 0), (-1, 1)], [(0, 0), (1, 1)])])


# ---------------------------------------------------------------- JSON paths and corruptions

def leaves(value, path=()):
    """(path, value) of every scalar leaf."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, path + (i,))
    else:
        yield path, value


def keys(value, path=()):
    """(path of the object, key) of every object key."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield path, k
            yield from keys(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from keys(v, path + (i,))


def lists(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from lists(v, path + (k,))
    elif isinstance(value, list):
        yield path, value
        for i, v in enumerate(value):
            yield from lists(v, path + (i,))


def get(value, path):
    for p in path:
        value = value[p]
    return value


def json_path(path) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


# Replacement texts: each is spliced into the JSON text raw, so NaN / Infinity /
# 1e999999 are bare JSON tokens, not strings.
BAD_VALUES = ['NaN', '-Infinity', 'Infinity', '""', '"  "', '"1/0"', '"0/0"', '"abc"', '"1e999999"', '1e999999',
              '"1.2.3"', '"--1"', '"1/2/3"', '"0x10"', '"١"', '"1_000"', '"nan"', '"inf"', 'true', 'false',
              'null', '[1]', '{"a": 1}', '"1' + "0" * 70000 + '"', "1" + "0" * 70000]  # over every digits limit


def splice(value, path, replacement_text: str) -> str:
    """The JSON text of ``value`` with the leaf at ``path`` replaced by raw text."""
    marker = "@@CORRUPT@@"
    doc = copy.deepcopy(value)
    parent = get(doc, path[:-1])
    parent[path[-1]] = marker
    return json.dumps(doc).replace(json.dumps(marker), replacement_text)


def delete_key(value, path, key) -> str:
    doc = copy.deepcopy(value)
    del get(doc, path)[key]
    return json.dumps(doc)


def change_length(value, path, grow: bool) -> str:
    doc = copy.deepcopy(value)
    target = get(doc, path)
    if grow or not target:
        target.append("1")
    else:
        target.pop()
    return json.dumps(doc)


# Which leaves a corruption must be caught at. Certificate: the claims' fields
# (the size claim compares stated values and fails as a claim, exit 1, so it is
# left out) and the phases' block ranges; top-level "attention"/"theorem" are
# compared with the model (a false value fails as a claim, exit 1), and
# deleting them is an input error.
def cert_leaf_ok(path, cert=None) -> bool:
    if not (len(path) >= 3 and path[0] == "phases" and path[2] in ("blocks", "claims")):
        return False
    if cert is not None and len(path) >= 5 and path[2] == "claims":
        claim = get(cert, path[:4])
        return claim.get("kind") != "size" or path[4] == "theorem"
    return True


OPTIONAL_CLAIM_FIELDS = {"margin", "min_gap"}  # null or absent is allowed
ABSENT_OK_CLAIM_FIELDS = OPTIONAL_CLAIM_FIELDS | {"above"}  # a hat without ``above`` is a claim of its own


def cert_key_required(cert, path, key) -> bool:
    if path == ():
        return key in ("format", "model_sha256", "dataset_sha256", "attention", "theorem", "phases")
    if len(path) == 2 and path[0] == "phases":
        return True  # name, blocks, claims
    if len(path) == 4 and path[2] == "claims":
        kind = get(cert, path).get("kind")
        if key == "kind":
            return True
        if kind == "size":
            return key in ("theorem", "bounds")
        return key not in ABSENT_OK_CLAIM_FIELDS
    return False


def vector_lists(name: str, value) -> list[tuple]:
    """Paths of lists whose length is fixed by the format (tokens, rows, vectors)."""
    out = []
    for path, lst in lists(value):
        last = path[-1] if path else None
        if name == "dataset":
            if len(path) == 4 and path[0] == "pairs":  # pairs[j].input[i]
                out.append(path)
        elif name == "model":
            if last in ("b", "u", "v") or (len(path) >= 2 and path[-2] in ("U", "W")):
                out.append(path)
        else:
            if cert_leaf_ok(path) and (last in ("to", "direction", "window", "blocks", "above")
                                       or (len(path) >= 2 and path[-2] == "moves")):
                out.append(path)
    return out


@st.composite
def corruptions(draw, values: dict, name: str):
    """(corrupted text, description) of one file of the bundle."""
    value = values[f"{name}.json"]
    how = draw(st.sampled_from(["leaf", "delete", "length"]))
    if how == "leaf":
        choices = [p for p, _ in leaves(value) if name != "certificate" or cert_leaf_ok(p, value)]
        path = draw(st.sampled_from(choices))
        optional = name == "certificate" and (path[-1] in OPTIONAL_CLAIM_FIELDS or "tokens" in path and path[-1] == 1)
        bad = draw(st.sampled_from([b for b in BAD_VALUES if not (optional and b == "null")]))
        return splice(value, path, bad), f"{json_path(path)} := {bad[:20]}"
    if how == "delete":
        choices = [(p, k) for p, k in keys(value)
                   if name != "certificate" or cert_key_required(value, p, k)]
        path, key = draw(st.sampled_from(choices))
        return delete_key(value, path, key), f"del {json_path(path)}.{key}"
    path = draw(st.sampled_from(vector_lists(name, value)))
    grow = draw(st.booleans())
    return change_length(value, path, grow), f"{'grow' if grow else 'shrink'} {json_path(path)}"


# ---------------------------------------------------------------- properties: every reader

@pytest.mark.slow
@FAST
@given(data=st.data())
def test_corrupted_dataset_construct(data, bundle_values, tmp_path_factory, capsys):
    text, what = data.draw(corruptions(bundle_values, "dataset"))
    tmp = tmp_path_factory.mktemp("c")
    ds = write_raw(tmp / "ds.json", text)
    construct_fails(ds, tmp, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["dataset", "model"])
@FAST
@given(data=st.data(), command=st.sampled_from(["verify", "audit"]))
def test_corrupted_input_verify_audit(which, data, command, bundle_values, tmp_path_factory, capsys):
    text, what = data.draw(corruptions(bundle_values, which))
    paths = write_bundle(tmp_path_factory.mktemp("c"), bundle_values, **{which: text})
    argv = verify_argv(paths) if command == "verify" else audit_argv(paths)
    rc, out, err = run(argv, capsys)
    assert_input_error(rc, out, err, paths[which])


@pytest.mark.slow
@FAST
@given(data=st.data())
def test_corrupted_certificate(data, bundle_values, tmp_path_factory, capsys):
    text, what = data.draw(corruptions(bundle_values, "certificate"))
    paths = write_bundle(tmp_path_factory.mktemp("c"), bundle_values, certificate=text)
    rc, out, err = run(verify_argv(paths), capsys)
    assert_input_error(rc, out, err, paths["certificate"])


def test_corrupted_error_names_the_path(bundle_values, tmp_path, capsys):
    """The JSON path in the message is the offender's, not just any path."""
    ds = write_raw(tmp_path / "ds.json", splice(bundle_values["dataset.json"], ("pairs", 3, "input", 1, 0), "NaN"))
    line = construct_fails(ds, tmp_path, capsys)
    assert f"{ds.name}: $.pairs[3].input[1][0]:" in line
    model = bundle_values["model.json"]
    paths = write_bundle(tmp_path, bundle_values, model=splice(model, ("blocks", 2, "ff", "W", 1, 0), '"1/0"'))
    rc, out, err = run(verify_argv(paths), capsys)
    assert "model.json: $.blocks[2].ff.W[1][0]: zero denominator" in assert_input_error(rc, out, err, "model.json")


@pytest.mark.parametrize("value", ["[1]", '{"a": 1}', "7", '"binary8"'])
def test_a_float_claims_format_that_is_no_format_name_is_an_input_error(value, bundle_values, tmp_path, capsys):
    """A float claim's format that is a list or an object (unhashable: a set lookup raised TypeError,
    found by test_corrupted_certificate), a number or an unknown name: one error line naming
    $.phases[…].claims[…].format, exit 2."""
    cert = bundle_values["certificate.json"]
    p, c = next((p, c) for p, phase in enumerate(cert["phases"]) for c, claim in enumerate(phase["claims"])
                if claim["kind"] == "float")
    paths = write_bundle(tmp_path, bundle_values, certificate=splice(cert, ("phases", p, "claims", c, "format"), value))
    rc, out, err = run(verify_argv(paths), capsys)
    line = assert_input_error(rc, out, err, "certificate.json")
    assert f"$.phases[{p}].claims[{c}].format: expected one of" in line


# ---------------------------------------------------------------- specific bad input, every command

@pytest.mark.parametrize("text, fragment", [
    ("", "malformed JSON"),
    ("{", "malformed JSON"),
    ('{"format": "tfcert.dataset/1",}', "malformed JSON"),
    ('{"format": "tfcert.dataset/1\x01"}', "malformed JSON at line 1 column 29: Invalid control character"),
    ('{"format": "tfcert', "malformed JSON at line 1 column 12: Unterminated string starting"),
    ("[1, 2]", "$: expected an object"),
    ('"hello"', "$: expected an object"),
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
])
def test_malformed_json(text, fragment, tmp_path, capsys):
    ds = write_raw(tmp_path / "ds.json", text)
    line = construct_fails(ds, tmp_path, capsys, path=False)
    assert fragment in line and not line.endswith(" at")  # json's messages end in " at" before the position


def _reference(text: str):
    """What a plain json.loads says of the text: its value, or 'duplicate' / 'malformed' (malformed
    first: a duplicate key in text that is malformed too may be reported either way)."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return "malformed"

    def hook(pairs):
        if len({k for k, _ in pairs}) != len(pairs):
            raise KeyError("duplicate")
        return dict(pairs)
    try:
        return json.loads(text, object_pairs_hook=hook)
    except KeyError:
        return "duplicate"
    except json.JSONDecodeError:
        return "malformed"


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-20, 20) | st.sampled_from(["", "1/2", "a:b", "{"]),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("abc"), inner,
                                                                                       max_size=3), max_leaves=12)


@given(st.dictionaries(st.sampled_from(["blocks", "d", "x"]), st.lists(JSON_VALUES, max_size=4).map(lambda v: v + v)
                       | st.lists(st.sampled_from([1, 12, 123, "1", [1], [1, 2]]), max_size=6) | JSON_VALUES, max_size=3),
       st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")]), st.sampled_from('[]{},:"1 x'))
@FAST
def test_parsing_reads_what_json_loads_reads(value, separators, char):
    """parse_document's element-by-element reading of a top-level object (an element written as the one
    before it is that same value) gives json.loads's value or refusal, on valid text and on text with
    one character changed; equal consecutive elements of a top-level array are one object."""
    good = json.dumps(value, separators=separators)
    changed = [good[:at] + char + good[at + 1:] for at in range(len(good))]
    for text in (good, *changed, good + good[1:], '{"a": 1, "a": [2]}'):
        expected = _reference(text)
        try:
            got = parse_document("f.json", text.encode()).value
        except InputError as exc:
            assert expected in ("duplicate", "malformed") and expected in str(exc).replace("duplicate key", "duplicate")
            continue
        assert got == expected
        for array in (got.values() if isinstance(got, dict) else ()):
            for a, b in zip(array, array[1:]) if isinstance(array, list) else ():
                if isinstance(a, (dict, list)):  # shared only when equal; when written alike (json.dumps), always
                    assert a is not b or json.dumps(a) == json.dumps(b)
                    assert text != good or (a is b) == (json.dumps(a) == json.dumps(b))


def test_not_utf8(tmp_path, capsys):
    ds = write_raw(tmp_path / "ds.json", b'{"format": "\xff\xfe"}')
    assert "UTF-8" in construct_fails(ds, tmp_path, capsys, path=False)


def ds_with(**changes) -> dict:
    ds = ok_dataset()
    ds.update(changes)
    return ds


@pytest.mark.parametrize("mutate, fragment", [
    (lambda ds: ds.update(format="tfcert.dataset/2"), "$.format: expected 'tfcert.dataset/1'"),
    (lambda ds: ds.update(format="tfcert.model/1"), "$.format"),
    (lambda ds: ds.pop("format"), "missing field 'format'"),
    (lambda ds: ds.pop("pairs"), "missing field 'pairs'"),
    (lambda ds: ds["pairs"][1].pop("output"), "$.pairs[1]: missing field 'output'"),
    (lambda ds: ds.update(d=1), "$.d"),
    (lambda ds: ds.update(d=0), "$.d"),
    (lambda ds: ds.update(d=-3), "$.d"),
    (lambda ds: ds.update(d="2"), "$.d: expected an integer"),
    (lambda ds: ds.update(d=2.0), "$.d: expected an integer"),
    (lambda ds: ds.update(d=True), "$.d: expected an integer"),
    (lambda ds: ds.update(d=3), "$.pairs[0].input[0]: expected 3 numbers, got 2"),
    (lambda ds: ds.update(pairs=[]), "$.pairs: the dataset has no pairs"),
    (lambda ds: ds.update(pairs={}), "$.pairs: expected a list"),
    (lambda ds: ds["pairs"][0].update(input=[]), "$.pairs[0].input: empty sequence"),
    (lambda ds: ds["pairs"][0].update(output=[]), "$.pairs[0].output: empty sequence"),
    (lambda ds: ds["pairs"][0]["input"][2].append("0"), "$.pairs[0].input[2]: expected 2 numbers, got 3"),
    (lambda ds: ds["pairs"][0]["input"][2].pop(), "$.pairs[0].input[2]: expected 2 numbers, got 1"),
    (lambda ds: ds["pairs"][0]["output"].__setitem__(0, "1"), "$.pairs[0].output[0]: expected a list"),
    (lambda ds: ds["pairs"][1]["input"][1].__setitem__(0, ""), "$.pairs[1].input[1][0]: empty string"),
    (lambda ds: ds["pairs"][1]["input"][1].__setitem__(0, "3/0"), "$.pairs[1].input[1][0]: zero denominator"),
    (lambda ds: ds["pairs"][1]["input"][1].__setitem__(0, "1e99999"), "$.pairs[1].input[1][0]: exponent"),
    (lambda ds: ds["pairs"][1]["input"][1].__setitem__(0, "12ab"), "$.pairs[1].input[1][0]: malformed number"),
    (lambda ds: ds["pairs"][1]["input"][1].__setitem__(0, "٣"), "$.pairs[1].input[1][0]: malformed number"),
    (lambda ds: ds["pairs"][1]["input"][1].__setitem__(0, "9" * 5000), "$.pairs[1].input[1][0]: number too large"),
    (lambda ds: ds["pairs"][1]["input"][1].__setitem__(0, False), "$.pairs[1].input[1][0]: expected a number"),
    (lambda ds: ds["pairs"][1]["input"][1].__setitem__(0, None), "$.pairs[1].input[1][0]: expected a number"),
])
def test_bad_dataset(mutate, fragment, tmp_path, capsys):
    ds = ok_dataset()
    mutate(ds)
    path = write_json(tmp_path / "ds.json", ds)
    line = construct_fails(path, tmp_path, capsys)
    assert fragment in line, line


def test_huge_bare_json_integer(tmp_path, capsys):
    """A bare JSON integer beyond Python's 4300-digit int() limit used to
    escape as a ValueError traceback from json.loads."""
    text = json.dumps(ok_dataset()).replace('"2"', "1" + "0" * 5000, 1)
    line = construct_fails(write_raw(tmp_path / "ds.json", text), tmp_path, capsys)
    assert "number too large" in line
    text = json.dumps(ok_dataset()).replace('"d": 2', '"d": 2' + "0" * 5000)
    assert "$.d: number too large" in construct_fails(write_raw(tmp_path / "ds.json", text), tmp_path, capsys)


def test_bare_nonfinite_and_overflowing_floats(tmp_path, capsys):
    for bad, fragment in (("NaN", "NaN is not a finite number"), ("-Infinity", "-Infinity is not a finite number"),
                          ("1e999999", "exponent out of range"), ("-1.5E-99999", "exponent out of range")):
        text = json.dumps(ok_dataset()).replace('"2"', bad, 1)
        line = construct_fails(write_raw(tmp_path / "ds.json", text), tmp_path, capsys)
        assert "$.pairs[0].input[2][0]" in line and fragment in line, line


# ---------------------------------------------------------------- dataset assumptions (DESIGN §2)

@given(value=st.fractions(-10, 10), side=st.sampled_from(["input", "output"]), where=st.integers(0, 2))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_repeated_token_any_spelling(value, side, where, tmp_path_factory, capsys):
    """Tokens within a sequence must be pairwise distinct as rationals: "1/2",
    "0.5", 0.5 and "5e-1" are the same number."""
    spellings = [str(value), f"{value.numerator * 3}/{value.denominator * 3}"]
    if value.denominator in (1, 2, 4, 5, 8, 10):
        spellings.append(str(float(value)))
    ds = {"format": "tfcert.dataset/1", "d": 2,
          "pairs": [{"input": [["7", "7"], ["8", "8"], ["9", "9"]], "output": [["1", "1"], ["2", "2"]]}]}
    seq = ds["pairs"][0][side]
    token = [spellings[0], "0"]
    twin = [spellings[-1], "0"]
    seq[min(where, len(seq) - 1)] = token
    seq.append(twin)
    if side == "output":
        ds["pairs"][0]["input"].append(["10", "10"])
        ds["pairs"][0]["input"].append(["11", "11"])
    tmp = tmp_path_factory.mktemp("rep")
    line = construct_fails(write_json(tmp / "ds.json", ds), tmp, capsys)
    assert f"$.pairs[0].{side}[{len(seq) - 1}]: token repeats {side}[{min(where, len(seq) - 2)}]" in line, line
    assert "pairwise distinct" in line


def test_more_outputs_than_inputs(tmp_path, capsys):
    ds = dataset_json(2, [([(1, 0), (0, 1)], [(3, 1)]), ([(1, 0)], [(0, 0), (1, 1)])])
    line = construct_fails(write_json(tmp_path / "ds.json", ds), tmp_path, capsys)
    assert "$.pairs[1].output" in line and "m_j ≤ n_j" in line


@given(perm=st.permutations(range(3)), other=st.integers(0, 2))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_equal_input_sets_different_outputs(perm, other, tmp_path_factory, capsys):
    X = [(1, 0), (0, 1), (2, 3)]
    pairs = [(X, [(5, 5)]), ([(4, 4), (1, 1)], [(0, 0)]), ([X[i] for i in perm], [(5, 5), (6, 6)][: 1 + other % 2])]
    if other % 2 == 0:
        pairs[2] = (pairs[2][0], [(5, 6)])
    tmp = tmp_path_factory.mktemp("eq")
    line = construct_fails(write_json(tmp / "ds.json", dataset_json(2, pairs)), tmp, capsys)
    assert "$.pairs[2]" in line and "$.pairs[0]" in line
    assert "no permutation-equivariant map" in line


def test_duplicate_pairs_dropped_with_warning(tmp_path, capsys):
    X = [(1, 0), (0, 1), (2, 3)]
    ds = dataset_json(2, [(X, [(5, 5), (1, 2)]), ([(4, 4), (1, 1)], [(0, 0)]),
                          ([X[2], X[0], X[1]], [(1, 2), (5, 5)])])  # same sets, other order
    path = write_json(tmp_path / "ds.json", ds)
    rc, out, err = run(["construct", path, "-o", tmp_path / "out", "--json"], capsys)
    assert rc == 0, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "$.pairs[2]" in lines[0], err
    assert "error" not in err and "Traceback" not in err
    summary = json.loads(out)
    assert summary["size"]["d_sum_m"] == 2 * 3  # the duplicate's outputs are not counted
    out_dir = tmp_path / "out"
    assert (out_dir / "dataset.json").read_bytes() == path.read_bytes()
    # verify and audit read the same dataset: the same warning, and success
    rc, _, err2 = run(verify_argv({k: out_dir / f"{k}.json" for k in ("model", "dataset", "certificate")}), capsys)
    assert rc == 0
    assert err2.splitlines() == [lines[0].replace(str(path), str(out_dir / "dataset.json"))]
    rc, out, err3 = run(["audit", "--model", out_dir / "model.json", "--dataset", path, "--json"], capsys)
    assert rc == 0 and err3 == err
    assert [s["sequence"] for s in json.loads(out)["sequences"]] == [0, 1]


# ---------------------------------------------------------------- files, directories, options

def test_missing_files(bundle_values, tmp_path, capsys):
    paths = write_bundle(tmp_path, bundle_values)
    missing = tmp_path / "nope.json"
    rc, out, err = run(["construct", missing, "-o", tmp_path / "o"], capsys)
    assert "cannot read" in assert_input_error(rc, out, err, missing, path=False)
    assert not (tmp_path / "o").exists()
    for key in ("model", "dataset", "certificate"):
        rc, out, err = run(verify_argv({**paths, key: missing}), capsys)
        assert "cannot read" in assert_input_error(rc, out, err, missing, path=False)
    for key in ("model", "dataset"):
        rc, out, err = run(audit_argv({**paths, key: missing}), capsys)
        assert "cannot read" in assert_input_error(rc, out, err, missing, path=False)
    rc, out, err = run(verify_argv({**paths, "model": tmp_path}), capsys)  # a directory
    assert_input_error(rc, out, err, tmp_path, path=False)


def test_wrong_file_in_each_slot(bundle_values, tmp_path, capsys):
    """A dataset where the model goes, and so on: the format tag names the file."""
    paths = write_bundle(tmp_path, bundle_values)
    for key, other in (("model", "dataset"), ("dataset", "certificate"), ("certificate", "model")):
        rc, out, err = run(verify_argv({**paths, key: paths[other]}), capsys)
        line = assert_input_error(rc, out, err, paths[other])
        assert "$.format" in line or "missing field" in line, line


def test_model_dataset_dimension_mismatch(bundle_values, tmp_path, capsys):
    ds = copy.deepcopy(bundle_values["dataset.json"])
    ds["d"] = 3
    for pair in ds["pairs"]:
        for side in ("input", "output"):
            for token in pair[side]:
                token.append("0")
    paths = write_bundle(tmp_path, bundle_values, dataset=json.dumps(ds))
    for argv in (verify_argv(paths), audit_argv(paths)):
        rc, out, err = run(argv, capsys)
        assert "$.d" in assert_input_error(rc, out, err, "model.json")


@pytest.mark.parametrize("mutate, fragment", [
    (lambda m: m.update(attention="relu"), "$.attention"),
    (lambda m: m.update(attention="softmax"), "temperature"),
    (lambda m: m.update(attention="softmax", temperature="0"), "$.temperature: must be > 0"),
    (lambda m: m.update(attention="softmax", temperature="-1/2"), "$.temperature: must be > 0"),
    (lambda m: m["blocks"][3]["ff"]["W"].pop(), "$.blocks[3].ff.W: expected 2 rows"),
    (lambda m: m["blocks"][3]["ff"]["b"].append("1"), "$.blocks[3].ff.b: expected 4 numbers, got 5"),
    (lambda m: m["blocks"][3]["ff"]["U"].pop(), "$.blocks[3].ff.b: expected 3 numbers, got 4"),
    (lambda m: m["blocks"][0]["sa"]["V"].pop("low_rank"), "$.blocks[0].sa.V: missing field 'low_rank'"),
    (lambda m: m["blocks"][7]["sa"]["V"]["low_rank"][0]["u"].append("0"),
     "$.blocks[7].sa.V.low_rank[0].u: expected 2 numbers, got 3"),
    (lambda m: m["blocks"][7]["sa"]["A"].update(scale="1/0"), "$.blocks[7].sa.A.scale: zero denominator"),
    (lambda m: m.update(blocks={}), "$.blocks: expected a list"),
])
def test_bad_model(mutate, fragment, bundle_values, tmp_path, capsys):
    model = copy.deepcopy(bundle_values["model.json"])
    mutate(model)
    paths = write_bundle(tmp_path, bundle_values, model=json.dumps(model))
    for argv in (verify_argv(paths), audit_argv(paths)):
        rc, out, err = run(argv, capsys)
        line = assert_input_error(rc, out, err, paths["model"])
        assert fragment in line, line


def first_claim(cert, kind):
    for p, phase in enumerate(cert["phases"]):
        for c, claim in enumerate(phase["claims"]):
            if claim["kind"] == kind:
                return p, c, claim
    raise LookupError(kind)


@pytest.mark.parametrize("kind, mutate, fragment", [
    (None, lambda c: c.update(format="tfcert.certificate/0"), "$.format"),
    (None, lambda c: c.pop("model_sha256"), "missing field 'model_sha256'"),
    (None, lambda c: c.update(phases=[{"name": "x", "blocks": [0], "claims": []}]), "$.phases[0].blocks"),
    (None, lambda c: c.update(phases=[{"name": "x", "blocks": [3, 1], "claims": []}]), "$.phases[0].blocks[1]"),
    (None, lambda c: c.update(phases=[{"name": "x", "blocks": [0, 99], "claims": []}]), "$.phases[0].blocks[1]"),
    ("hat", lambda h: h.update(kind="bogus"), "unknown claim kind 'bogus'"),
    ("hat", lambda h: h.update(block=8), "lies outside the phase's blocks"),
    ("hat", lambda h: h.update(units=[0, 1, 7]), ".units[2]"),
    ("hat", lambda h: h.update(units=[]), ".units: empty"),
    ("hat", lambda h: h.update(window=["0"]), ".window: expected [lo, hi]"),
    ("hat", lambda h: h.update(moves=[[99, 0]]), ".moves[0][0]: no sequence 99"),
    ("hat", lambda h: h.update(moves=[[0, 9]]), ".moves[0][1]"),
    ("hat", lambda h: h.update(moves=[[0]]), ".moves[0]: expected [sequence, token]"),
    ("hat", lambda h: h.update(to=["1"]), ".to: expected 2 numbers, got 1"),
    ("hat", lambda h: h.update(margin="1/0"), ".margin: zero denominator"),
    ("argmax", lambda a: a["tokens"].pop(), ".tokens: expected one list per sequence"),
    ("argmax", lambda a: a["tokens"][1].pop(), ".tokens[1]: expected 4 tokens"),
    ("argmax", lambda a: a["tokens"][1][2].__setitem__(1, "x"), ".tokens[1][2][1]: malformed number"),
    ("argmax", lambda a: a.update(ties=-1), ".ties"),
    ("clusters", lambda c: c["distinct"].append(1), ".distinct: expected one count per sequence"),
    ("clusters", lambda c: c["distinct"].__setitem__(0, 0), ".distinct[0]"),
    ("separation", lambda s: s.update(direction=["1", "0", "0"]), ".direction: expected 2 numbers, got 3"),
    ("size", lambda s: s.update(theorem="9.9"), ".theorem: expected one of"),
    ("size", lambda s: s.update(bounds=[]), ".bounds: expected an object"),
])
def test_bad_certificate(kind, mutate, fragment, bundle_values, tmp_path, capsys):
    cert = copy.deepcopy(bundle_values["certificate.json"])
    if kind is None:
        mutate(cert)
        where = "$"
    else:
        p, c, claim = first_claim(cert, kind)
        mutate(claim)
        where = f"$.phases[{p}].claims[{c}]"
    paths = write_bundle(tmp_path, bundle_values, certificate=json.dumps(cert))
    rc, out, err = run(verify_argv(paths), capsys)
    line = assert_input_error(rc, out, err, paths["certificate"])
    assert where in line and fragment in line, line


# Non-hashable values and claims on a model without blocks are bad input too.
@pytest.mark.parametrize("case", ["kind-list", "theorem-list", "empty-model-hat"])
def test_certificate_crashes(case, bundle_values, tmp_path, capsys):
    cert = copy.deepcopy(bundle_values["certificate.json"])
    raw = {}
    if case == "kind-list":
        first_claim(cert, "hat")[2]["kind"] = ["hat"]
    elif case == "theorem-list":
        first_claim(cert, "size")[2]["theorem"] = ["1.6"]
    else:
        model = copy.deepcopy(bundle_values["model.json"])
        model["blocks"] = []
        raw["model"] = json.dumps(model)
        cert["phases"] = [{"name": "x", "blocks": [0, 0], "claims": [{**first_claim(cert, "hat")[2], "block": 0}]}]
    paths = write_bundle(tmp_path, bundle_values, certificate=json.dumps(cert), **raw)
    rc, out, err = run(verify_argv(paths), capsys)
    assert_input_error(rc, out, err, paths["certificate"])


@pytest.mark.parametrize("width", ["2", "1", "0", "-3"])
def test_construct_width_too_small(width, tmp_path, capsys, demo_dataset):
    rc, out, err = run(["construct", demo_dataset, "-o", tmp_path / "o", "--width", width], capsys)
    assert "--width" in assert_input_error(rc, out, err, None, path=False)
    assert not (tmp_path / "o").exists()
    rc, out, err = run(["construct", demo_dataset, "-o", tmp_path / "o", "--width", "3", "--attention", "softmax"],
                       capsys)
    assert "--width" in assert_input_error(rc, out, err, None, path=False)


def test_usage_errors_exit_2(capsys, tmp_path, demo_dataset):
    for argv in (["verify"], ["construct"], ["audit", "--model", "m.json"], ["frobnicate"],
                 ["construct", str(demo_dataset), "-o", str(tmp_path / "o"), "--width", "abc"]):
        rc, out, err = run(argv, capsys)
        assert rc == 2 and out == "" and "Traceback" not in err and "error:" in err
    assert not (tmp_path / "o").exists()


def test_audit_bad_temperature(bundle_values, tmp_path, capsys):
    paths = write_bundle(tmp_path, bundle_values)
    for tau, fragment in (("abc", "--temperature: malformed"), ("0", "--temperature: must be > 0"),
                          ("1/0", "zero denominator"), ("1", "softmax")):
        rc, out, err = run([*audit_argv(paths), "--temperature", tau], capsys)
        assert fragment in assert_input_error(rc, out, err, None, path=False)


# ---------------------------------------------------------------- unwritable outputs, nothing half-written

def test_construct_output_not_writable(tmp_path, capsys, demo_dataset):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out_dir in (blocker, blocker / "sub"):  # a file, and a directory under a file
        rc, out, err = run(["construct", demo_dataset, "-o", out_dir], capsys)
        assert_input_error(rc, out, err, out_dir, path=False)
    assert blocker.read_text() == "x"


def test_construct_bad_input_leaves_existing_bundle_alone(tmp_path, capsys, demo_dataset):
    out_dir = tmp_path / "o"
    assert run(["construct", demo_dataset, "-o", out_dir], capsys)[0] == 0
    before = {f: (out_dir / f).read_bytes() for f in BUNDLE_FILES}
    bad = write_raw(tmp_path / "bad.json", demo_dataset.read_text().replace('"1/2"', '"1/0"', 1))
    rc, out, err = run(["construct", bad, "-o", out_dir, "--force"], capsys)
    assert_input_error(rc, out, err, bad)
    assert {f: (out_dir / f).read_bytes() for f in BUNDLE_FILES} == before
    assert sorted(os.listdir(out_dir)) == sorted(BUNDLE_FILES)


def test_construct_partial_write_failure(tmp_path, capsys, demo_dataset):
    out_dir = tmp_path / "o"
    (out_dir / "model.json").mkdir(parents=True)  # the rename of model.json fails
    rc, out, err = run(["construct", demo_dataset, "-o", out_dir], capsys)
    assert_input_error(rc, out, err, out_dir, path=False)
    assert sorted(os.listdir(out_dir)) == ["model.json"]


def test_unwritable_junit_and_audit_certificate(bundle_values, tmp_path, capsys):
    paths = write_bundle(tmp_path, bundle_values)
    nowhere = tmp_path / "missing-dir" / "x.xml"
    rc, out, err = run([*verify_argv(paths), "--junit", nowhere], capsys)
    assert "cannot write" in assert_input_error(rc, out, err, nowhere, path=False)
    rc, out, err = run([*audit_argv(paths), "-o", nowhere], capsys)
    assert "cannot write" in assert_input_error(rc, out, err, nowhere, path=False)
    assert not nowhere.parent.exists()


# ---------------------------------------------------------------- the real process

def test_process_error_is_one_line_no_traceback(tmp_path):
    """Through the installed entry point: stderr is exactly one line."""
    ds = write_raw(tmp_path / "ds.json", json.dumps(ok_dataset()).replace('"2"', "NaN", 1))
    proc = subprocess.run([sys.executable, "-m", "tfcert", "construct", str(ds), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"error: {ds}: $.pairs[0].input[2][0]: NaN is not a finite number\n"
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- exact numbers

def read_number_through_file(text: str) -> fmpq:
    """Put ``text`` (raw JSON) as one coordinate of a dataset and read it back."""
    raw = '{"format": "tfcert.dataset/1", "d": 2, "pairs": [{"input": [[%s, "0"]], "output": [["0", "0"]]}]}' % text
    return read_dataset(parse_document("ds.json", raw.encode())).pairs[0].input[0][0]


def as_fraction(x: fmpq) -> Fraction:
    return Fraction(int(x.p), int(x.q))


@settings(max_examples=200, deadline=None)
@given(st.integers(-10**30, 10**30), st.integers(0, 40), st.integers(-60, 60), st.booleans(), st.booleans())
def test_bare_json_float_is_the_exact_decimal(mantissa, point, exponent, upper, with_exp):
    """A bare JSON float is read as the decimal written (0.1 = 1/10), never via a binary float."""
    digits = str(abs(mantissa)).rjust(point + 1, "0")
    text = ("-" if mantissa < 0 else "") + digits[:len(digits) - point] + "." + (digits[len(digits) - point:] or "0")
    if with_exp:
        text += ("E" if upper else "e") + str(exponent)
    expected = Fraction(text)  # Fraction parses decimal text exactly
    assert as_fraction(read_number_through_file(text)) == expected
    assert as_fraction(parse_number(text, "x")) == expected  # and as a string


def test_number_examples():
    assert read_number_through_file("0.1") == fmpq(1, 10)
    assert read_number_through_file("0.1") != fmpq(*Fraction(0.1).as_integer_ratio())  # not the binary double
    assert read_number_through_file('"3e-4"') == fmpq(3, 10000)
    assert read_number_through_file('"7/12"') == fmpq(7, 12)
    assert read_number_through_file('"-14/24"') == fmpq(-7, 12)
    assert read_number_through_file("1E2") == 100
    assert read_number_through_file('"-1.25"') == fmpq(-5, 4)
    assert read_number_through_file('".5"') == fmpq(1, 2)
    assert read_number_through_file('"5."') == 5
    assert read_number_through_file('"+2"') == 2
    assert read_number_through_file("-0.0") == 0
    assert read_number_through_file("12345678901234567890123") == 12345678901234567890123


_NINES, _SEVENS = fmpz(10)**4000 - 1, (fmpz(10)**4000 - 1) // 9 * 7


@pytest.mark.parametrize("text, value", [
    ("9" * 4000, _NINES), ("-" + "9" * 4000, -_NINES), ('"%s"' % ("9" * 4000), _NINES),  # bare and as a string
    ('"%s/%s"' % ("7" * 4000, "1" + "0" * 3998 + "1"), fmpq(_SEVENS, fmpz(10)**3999 + 1)),
    ('"-0.%se-4000"' % ("9" * 3999), -fmpq(fmpz(10)**3999 - 1, fmpz(10)**7999)),
    ("9" * 4001, None), ("-" + "9" * 4001, None), ("1" + "0" * 4015, None), ('"%s"' % ("9" * 4001), None),
    ('"%s/3"' % ("7" * 4001), None), ('"3/%s"' % ("9" * 4001), None), ('"1.%se5"' % ("0" * 4000), None),
])
def test_a_dataset_number_has_at_most_4000_digits_however_written(text, value):
    """The format's limit counts digits — of an integer, a numerator, a denominator or a
    mantissa — not characters or bits: 4000 are read exactly, 4001 are refused with the path."""
    if value is None:
        with pytest.raises(InputError, match=r"^ds\.json: \$\.pairs\[0\]\.input\[0\]\[0\]: "
                                             r"number too large \(\d+ digits, limit digits=4000\)$"):
            read_number_through_file(text)
    else:
        assert read_number_through_file(text) == value


def test_a_huge_digits_limit_reads_a_bare_integer_without_forming_its_power_of_ten():
    """--limit digits=N takes N up to 2^62: 10^N must never be formed for a short number."""
    assert parse_number(7, "$.x", 2**62 - 1) == 7
    assert parse_number(-10**3999, "$.x", 2**62 - 1) == -fmpz(10)**3999


@settings(max_examples=200, deadline=None)
@given(st.fractions())
def test_round_trip_fmpq_str_parse(value):
    x = fmpq(value.numerator, value.denominator)
    assert parse_number(fmt(x), "x") == x
    assert read_number_through_file(json.dumps(fmt(x))) == x


@settings(max_examples=200, deadline=None)
@given(st.integers(-10**40, 10**40), st.integers(1, 10**40))
def test_fraction_strings(p, q):
    assert as_fraction(parse_number(f"{p}/{q}", "x")) == Fraction(p, q)
    assert as_fraction(parse_number(f"{p}", "x")) == p


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.text(max_size=12))
def test_malformed_number_strings_are_errors(text):
    """Anything that is not an (ASCII) integer, decimal or fraction is an
    InputError naming the place — never another exception, never a number
    that differs from the exact reading."""
    stripped = text.strip()
    expected = None
    if stripped.isascii() and "_" not in stripped:  # Fraction also reads "1_0"; the format does not
        try:
            expected = Fraction(stripped)
        except (ValueError, ZeroDivisionError):
            pass
    try:
        value = parse_number(text, "$.x")
    except InputError as exc:
        assert str(exc).startswith("$.x: ")
        return
    assert expected is not None, (text, value)
    assert as_fraction(value) == expected


def test_check_junit_refuses_to_overwrite_a_bundle_file(tmp_path, capsys):
    """check --junit onto a bundle's own model.json replaced it with XML (exit 0)."""
    shutil.copytree(REPO / "certificates" / "demo-hardmax", tmp_path / "b")
    before = (tmp_path / "b" / "model.json").read_bytes()
    rc, out, err = run(["check", "-q", "--junit", tmp_path / "b" / "model.json", tmp_path / "b"], capsys)
    assert rc == 2 and err.startswith("error:") and err.count("\n") == 1, err
    assert (tmp_path / "b" / "model.json").read_bytes() == before


@pytest.mark.parametrize("limit", ["z3_seconds=inf", "z3_seconds=nan", "file_bytes=" + "9" * 30])
def test_limits_out_of_range_are_one_error_line(limit, capsys):
    """inf passed as positive and then failed every region claim as 'not checked'; a huge
    file_bytes failed at the read with a message naming neither the option nor a file."""
    rc, out, err = run(["verify", str(REPO / "certificates" / "demo-hardmax"), "--limit", limit], capsys)
    assert rc == 2 and err == f"error: --limit {limit}: expected a positive number below 2^62\n", err


def test_audit_with_an_enclosure_out_of_range_is_not_checked(tmp_path, capsys):
    """A format-valid softmax model whose enclosure endpoints exceed arb's range: not checked
    (exit 1), as verify says, not an exit 2 naming no file."""
    big = "1" + "0" * 5000
    model = {"format": "tfcert.model/1", "d": 2, "attention": "softmax", "temperature": "1", "blocks": [
        {"ff": {"eta": "1", "U": [], "b": [], "W": [[], []]},
         "sa": {"rho": "0", "A": {"scale": "1", "low_rank": []},
                "V": {"scale": "0", "low_rank": [{"u": ["1", "0"], "v": [big, "0"]}]}}}]}
    data = {"format": "tfcert.dataset/1", "d": 2, "pairs": [{"input": [["1", "0"], ["0", "1"]], "output": [["1", "0"]]}]}
    write_json(tmp_path / "model.json", model)
    write_json(tmp_path / "dataset.json", data)
    rc, out, err = run(["audit", "--model", tmp_path / "model.json", "--dataset", tmp_path / "dataset.json"], capsys)
    assert rc == 1 and "not checked" in out and err == "", (out, err)


def test_a_dataset_over_the_tokens_limit_is_refused_before_any_work(tmp_path, capsys):
    """A legal 5 MB dataset ran for minutes and 1.6 GB: construct, verify and
    audit now refuse a dataset holding more input tokens than the limit
    ``tokens`` (one error line naming the file and the limit, exit 2, nothing
    written), and --limit tokens=N lets it through."""
    demo = REPO / "certificates" / "demo-hardmax"
    tokens = sum(len(p["input"]) for p in json.loads((demo / "dataset.json").read_text())["pairs"])
    small = f"tokens={tokens - 1}"
    runs = {"construct": ["construct", demo / "dataset.json", "-o", tmp_path / "out"],
            "verify": ["verify", demo], "audit": ["audit", demo]}
    for name, argv in runs.items():
        rc, out, err = run([*argv, "--limit", small], capsys)
        assert rc == 2 and out == "" and err.count("\n") == 1, (name, err)
        assert err.startswith(f"error: {demo / 'dataset.json'}: $.pairs: {tokens} input tokens, over the limit "
                              f"{small}"), (name, err)
        assert name != "construct" or not (tmp_path / "out").exists()
        rc, out, err = run([*argv, "--limit", f"tokens={tokens}"], capsys)
        assert rc == 0, (name, err)


def test_the_default_tokens_limit_refuses_a_large_dataset_at_once(tmp_path, capsys):
    """With no --limit, 10 001 one-token sequences (400 kB) are refused at the
    read; before, audit replayed them and construct ran for minutes."""
    n = 10_001  # the default limit, 10 000, plus one
    pairs = [{"input": [[str(i), "0"]], "output": [["0", "0"]]} for i in range(n)]
    write_json(tmp_path / "big.json", {"format": "tfcert.dataset/1", "d": 2, "pairs": pairs})
    model = REPO / "certificates" / "demo-hardmax" / "model.json"
    for argv in (["audit", "--model", model, "--dataset", tmp_path / "big.json"],
                 ["construct", tmp_path / "big.json", "-o", tmp_path / "out"]):
        rc, out, err = run(argv, capsys)
        assert rc == 2 and err == (f"error: {tmp_path / 'big.json'}: $.pairs: {n} input tokens, over the limit "
                                   f"tokens={n - 1}; raise it with --limit tokens=N\n"), err
    assert not (tmp_path / "out").exists()


def test_a_limit_error_says_how_to_raise_the_limit(tmp_path, capsys):
    """The refusal named the limit but not how to raise it: the command line's
    error ends "; raise it with --limit NAME=N" (tokens, file_bytes, digits,
    and the construction's own bundle past a limit); the library's, whose
    limits are tfcert.verify.numbers.LIMITS, says that instead."""
    demo = REPO / "certificates" / "demo-hardmax"
    for limit, fragment in (("tokens=3", "over the limit tokens=3"), ("file_bytes=100", "limit file_bytes=100"),
                            ("digits=2", "limit digits=2)")):
        name = limit.split("=")[0]
        rc, out, err = run(["verify", demo, "--limit", limit], capsys)
        line = assert_input_error(rc, out, err, None, path=name != "file_bytes")
        assert line.endswith(f"{fragment}; raise it with --limit {name}=N"), line
    rc, out, err = run(["construct", demo / "dataset.json", "-o", tmp_path / "b", "--limit", "digits=3"], capsys)
    line = assert_input_error(rc, out, err, demo / "dataset.json")
    assert line.endswith("limit digits=3)); raise it with --limit digits=N"), line

    import dataclasses

    from tfcert import api
    from tfcert.verify.numbers import LIMITS

    defaults = type(LIMITS)()
    for f in dataclasses.fields(LIMITS):  # main() leaves the last --limit set
        setattr(LIMITS, f.name, getattr(defaults, f.name))
    LIMITS.tokens = 3
    try:
        for call in (lambda: api.verify(demo), lambda: api.audit(demo),
                     lambda: api.construct(demo / "dataset.json")):
            with pytest.raises(InputError) as caught:
                call()
            assert str(caught.value).endswith(
                "13 input tokens, over the limit tokens=3; raise it with tfcert.verify.numbers.LIMITS.tokens = N")
        LIMITS.tokens = 13
        assert api.verify(demo).ok
    finally:
        LIMITS.tokens = defaults.tokens


def test_no_raise_hint_for_the_formats_own_digits(tmp_path, capsys):
    """A dataset's numbers and --temperature have the format's 4000 digits,
    which no --limit raises: their errors get no hint."""
    data = ok_dataset()
    data["pairs"][0]["input"][0][0] = "1" * 4100
    rc, out, err = run(["construct", write_json(tmp_path / "d.json", data), "-o", tmp_path / "b"], capsys)
    line = assert_input_error(rc, out, err, tmp_path / "d.json")
    assert line.endswith("limit digits=4000)"), line
    rc, out, err = run(["audit", REPO / "certificates" / "demo-softmax", "--temperature", "1" * 4100], capsys)
    line = assert_input_error(rc, out, err, None, path=False)
    assert line.endswith("limit digits=4000)"), line


def test_a_number_too_large_for_a_float_format_is_cut_in_the_message(tmp_path, capsys):
    """A float analysis that stops on a number the format cannot hold quotes it as every
    message quotes file text: cut to 200 characters, its length said (not 4001 digits)."""
    model = {"format": "tfcert.model/1", "d": 2, "attention": "hardmax", "blocks": [
        {"ff": {"eta": "1", "U": [["0", "0"]], "b": ["0"], "W": [["0"], ["0"]]},
         "sa": {"rho": "1", "A": {"scale": "0", "low_rank": []}, "V": {"scale": "0", "low_rank": []}}}]}
    data = dataset_json(2, [([["1e4000", "0"]], [["1e4000", "0"]])])
    rc, out, err = run(["audit", "--model", write_json(tmp_path / "m.json", model),
                        "--dataset", write_json(tmp_path / "d.json", data), "--float", "binary64"], capsys)
    line = next(line for line in out.splitlines() if line.startswith("float binary64"))
    assert line.endswith("…(4001 characters) overflows binary64") and len(line) < 400, line


def test_running_out_of_memory_is_one_error_line(monkeypatch, capsys):
    """A dataset whose exact numbers outgrow the machine (red team: 10 000 tokens on a convex
    curve with 10-digit prime denominators) ends in one error line and exit 2, not a traceback."""
    import tfcert.cli.main as cli

    def exhausted(args):
        raise MemoryError
    monkeypatch.setattr(cli, "cmd_verify", exhausted)
    rc, out, err = run(["verify", REPO / "certificates" / "demo-hardmax"], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: out of memory"), err


def test_the_hostile_costs_script_runs(capsys):
    """tests/hostile_costs.py --quick: the four hostile inputs of docs/certificates.md, small."""
    import hostile_costs

    assert hostile_costs.main(["--quick"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["convex", "dense", "cluster", "range"], lines
    assert all(re.search(r": exit [01], [\d.]+ s, \d+ MiB$", line) for line in lines), lines
