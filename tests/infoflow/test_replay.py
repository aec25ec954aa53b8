"""The independent checker accepts every witness the tool writes and rejects tampered ones."""
import ast
import copy
import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from tfcert.infoflow import (Architecture, Combine, Comparison, Reduce, Score, Target,
                             builtin_target, check_document, depth, min_heads, predict, replay)
from tfcert.verify.formats import parse_document

comparisons = st.builds(
    Comparison, name=st.sampled_from(["a", "b", "c"]), order=st.integers(1, 3),
    rank=st.sampled_from([1, 1, 2]), key_dim=st.integers(1, 3),
    reduce=st.sampled_from(["min", "max"]))
flat_targets = st.lists(comparisons, min_size=1, max_size=3, unique_by=lambda c: c.name).map(
    lambda cs: Target("random", tuple(cs)))


@st.composite
def nodes(draw, scope: tuple[str, ...], level: int, names: list):
    kinds = ["score", "comparison"] + (["reduce", "reduce", "combine"] if level < 3 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "comparison":
        names.append(f"c{len(names)}")
        return Comparison(names[-1], draw(st.integers(1, 3)), draw(st.sampled_from([1, 1, 2])),
                          draw(st.integers(1, 2)), draw(st.sampled_from(["min", "max"])))
    if kind == "score":
        pool = list(scope) + [1, 2]
        args = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique=True))
        return Score(draw(st.sampled_from(["f", "g"])), tuple(args))
    if kind == "combine":
        return Combine(draw(st.sampled_from(["sum", "min", "max"])),
                       tuple(draw(st.lists(nodes(scope, level + 1, names), min_size=1,
                                           max_size=3))))
    v = f"v{level}"
    partner = draw(st.sampled_from([None, *scope]))
    leaf = Score(draw(st.sampled_from(["f", "g"])), (v,) if partner is None else (partner, v))
    body = leaf
    if draw(st.booleans()):
        body = Combine("sum", (leaf, draw(nodes(scope + (v,), level + 1, names))))
    return Reduce(draw(st.sampled_from(["min", "max"])), (v,), body,
                  draw(st.sampled_from([1, 1, 1, 2])), draw(st.integers(1, 2)))


@st.composite
def tree_targets(draw):
    return Target("tree", tree=draw(nodes((), 0, [])))


targets = st.one_of(flat_targets, tree_targets())


@st.composite
def architectures(draw, target):
    T = max(target.min_T(), draw(st.integers(3, 24)))
    return Architecture(T, draw(st.integers(1, 3)), draw(st.integers(1, 4)),
                        tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))),
                        draw(st.booleans()))


def as_file(doc: dict):
    """The document as the checker reads it from a file (the verifier's JSON loader)."""
    return parse_document("w.json", json.dumps(doc).encode()).value


def accepted(doc: dict, proofs: bool = False):
    report = check_document("w.json", as_file(doc), proofs)
    assert report.valid, report.errors
    return report


SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SLOW
@given(st.data())
def test_every_witness_written_is_accepted(data):
    target = data.draw(targets)
    arch = data.draw(architectures(target))
    p = predict(target, arch)
    if p.witness is None:  # no derivation: unchecked proofs certify nothing
        doc = {"format": "tfcert.infoflow.witness/1", "target": target.name,
               "tree": target.calc.to_json(), "architecture": arch.to_json(),
               "derivation": False, "proofs": [{"kind": "no_derivation", "claim": p.proof_claim,
                                                "smt2": p.proof}]}
        report = check_document("w.json", as_file(doc), False)
        assert not report.valid and report.errors[0].startswith("no derivation")
        return
    report = accepted(p.witness.to_json())
    assert report.exponent == p.exponent and report.bounded == p.witness.cheap
    assert replay(target, arch, p.witness).ok


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(targets, st.integers(1, 3), st.booleans())
def test_every_min_heads_witness_is_accepted(target, layers, positional):
    m = min_heads(target, max(8, target.min_T()), layers, positional=positional)
    if m.witness is not None:
        assert accepted(m.witness.to_json()).bounded


def _remove_fact(doc, draw):
    steps = doc["steps"]
    i = draw(st.integers(0, len(steps) - 2))
    gone = steps.pop(i)
    for entry in doc["facts"]:
        cls = entry[gone["at"]]
        if gone["fact"] in cls:
            cls.remove(gone["fact"])


def _lower_exponent(doc, draw):
    e = Fraction(doc["exponent"])
    doc["exponent"] = str(e - draw(st.sampled_from([Fraction(1, 2), Fraction(1), e or 1])))


def _add_head(doc, draw):
    l = draw(st.integers(0, len(doc["layers"]) - 1))
    heads = doc["layers"][l]["heads"]
    mode = draw(st.sampled_from(["max", "kth", "global"] +
                                (["pos"] if doc["architecture"]["positional"] else [])))
    head = {"head": len(heads) + 1, "mode": mode, "at_t": None, "at_readout": None}
    if mode == "pos":
        head["positions"] = [1]
    if mode == "max" and draw(st.booleans()):
        head["at_readout"] = {"role": "copy", "node": None}
    heads.append(head)
    if draw(st.booleans()):  # the architecture too, or the head counts disagree
        doc["architecture"]["heads"][l] += 1


def _change_information_set(doc, draw):
    entry = draw(st.sampled_from(doc["information_sets"]))
    key = draw(st.sampled_from(["I(t,l)", "I(T+1,l)"]))
    value = entry[key]
    items = value["union"] if isinstance(value, dict) else value
    if items and draw(st.booleans()):
        items.remove(draw(st.sampled_from(items)))
    else:
        items.append(draw(st.sampled_from(["s9.9(t)", "1..T", "T+1", "t", "I(t,7)"])))


TAMPERING = {"fact removed": _remove_fact, "exponent lowered": _lower_exponent,
             "head added": _add_head, "information set changed": _change_information_set}


@pytest.mark.slow
@SLOW
@given(st.data(), st.sampled_from(sorted(TAMPERING)))
def test_tampered_witnesses_are_rejected(data, kind):
    target = data.draw(st.one_of(targets, st.sampled_from(
        ["pairwise-min", "intrinsic-dim:D=2", "kth-largest:k=2", "triangle-center",
         "alternation:k=3"]).map(builtin_target)))
    arch = data.draw(architectures(target))
    p = predict(target, arch)
    assume(p.witness is not None)
    doc = p.witness.to_json()
    accepted(doc)
    bad = copy.deepcopy(doc)
    TAMPERING[kind](bad, data.draw)
    assume(bad != doc)
    report = check_document("w.json", as_file(bad), proofs=False)
    assert not report.valid, kind


def test_an_idle_global_head_in_a_cheap_witness_is_refused():
    """The issue's example: a global head added to a T-bounded witness (its cost would grow)."""
    doc = predict(builtin_target("pairwise-min"), Architecture(16, heads=(1, 1))).witness.to_json()
    doc["architecture"]["heads"] = [2, 1]
    doc["layers"][0]["heads"].append({"head": 2, "mode": "global", "at_t": None,
                                      "at_readout": None})
    doc["information_sets"] = [
        {"layer": 0, "I(t,l)": ["t"], "I(T+1,l)": ["T+1"]},
        {"layer": 1, "I(t,l)": ["1..T"], "I(T+1,l)": ["T+1", "1..T"]},
        {"layer": 2, "I(t,l)": ["1..T"], "I(T+1,l)": ["T+1", "1..T"]}]
    report = check_document("w", doc, proofs=False)
    assert report.errors == ["layer 1 head 2: an idle global head (no step uses it; an unused "
                             "head must be off)"]


def test_deleting_every_fact_is_refused():
    doc = predict(builtin_target("intrinsic-dim:D=2"), Architecture(9, heads=(2, 2))
                  ).witness.to_json()
    doc["steps"] = doc["steps"][-1:]
    for entry in doc["facts"]:
        entry["t"], entry["T+1"] = [], []
    report = check_document("w", doc, proofs=False)
    assert not report.valid and report.errors[0].startswith("step 1 (y at T+1, layer 2, readout)")


@pytest.mark.slow
def test_large_information_sets_are_given_as_unions_and_checked():
    """40 anchors then 40 resolves: I(T+1, 2) would list 40 * 41 + 1 positions; the witness
    gives each set as the union of the sets its heads read."""
    w = predict(builtin_target("intrinsic-dim:D=120"), Architecture(8, heads=(120, 120))).witness
    doc = w.to_json()
    assert doc["information_sets"][2]["I(T+1,l)"]["union"][:2] == ["I(T+1,1)", "I(s2.1(T+1),1)"]
    accepted(doc)
    doc["information_sets"][2]["I(T+1,l)"]["union"].pop()
    assert not check_document("w", doc, proofs=False).valid


def test_depth_witness_with_proofs_is_accepted():
    r = depth(builtin_target("alternation:k=4"), 10)
    doc = {**r.witness.to_json(), "proofs": [
        {"kind": p.kind, "claim": p.claim, "smt2": p.smt2,
         **({"layer": p.layer} if p.kind == "fewer_heads" else {})} for p in r.proofs]}
    report = accepted(doc, proofs=True)
    assert [c["statement"] for c in report.certified[1:]] == [p.claim for p in r.proofs]


def test_replay_rejects_a_witness_for_another_architecture():
    target = builtin_target("pairwise-min")
    w = predict(target, Architecture(8, heads=(1, 1))).witness
    assert not replay(target, Architecture(9, heads=(1, 1)), w).ok
    assert not replay(builtin_target("alternation:k=2"), w.arch, w).ok


def test_min_heads_witness_is_cheap_and_replays():
    target = builtin_target("pairwise-min")
    m = min_heads(target, 12, 3)
    assert m.min_heads == (0, 1, 1) and m.witness.cheap  # layer 1 is minimised first
    assert replay(target, m.arch, m.witness).ok


def test_checker_shares_nothing_with_the_search():
    """check.py imports no other InfoFlow module (no rules, costs, propagation, search), only
    the verifier's JSON loader, the error type, the standard library and, to re-run proofs,
    z3's parser."""
    import tfcert.infoflow.check as module
    tree = ast.parse(Path(module.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names == {"__future__", "re", "dataclasses", "fractions", "math", "tfcert.errors",
                     "tfcert.verify.formats", "z3"}


def test_no_heads_means_no_derivation_and_an_unsat_proof():
    from tfcert.infoflow import recheck
    p = predict(builtin_target("pairwise-min"), Architecture(8, heads=(0, 0)))
    assert p.witness is None and not p.efficient and recheck(p.proof) == "unsat"
