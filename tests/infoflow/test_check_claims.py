"""What ``infoflow check`` certifies, and the fields it recomputes instead of echoing."""
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from test_replay import architectures, targets

from tfcert.errors import InputError
from tfcert.infoflow import (Architecture, builtin_target, check_document, depth, load_tree,
                             min_heads, predict)
from tfcert.cli.infoflow import _witness_document
from tfcert.verify.formats import parse_document


def as_file(doc: dict):
    return parse_document("w.json", json.dumps(doc).encode()).value


def _pairwise_witness() -> dict:
    return predict(builtin_target("pairwise-min"), Architecture(8, heads=(1, 1))).witness.to_json()


def test_a_target_relabelled_as_another_built_in_is_refused():
    doc = _pairwise_witness()
    assert check_document("w", as_file(doc), proofs=False).valid
    doc["target"] = "triangle-center"  # a T-bounded derivation of the triangle centre, it would say
    report = check_document("w", as_file(doc), proofs=False)
    assert not report.valid and report.errors[0].startswith("$.target: 'triangle-center'")


def test_a_file_target_may_not_take_a_built_in_name(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"name": "triangle-center", "tree": {
        "op": "min", "over": "t", "of": {"op": "score", "name": "f", "args": ["t"]}}}))
    with pytest.raises(InputError, match=r"\$\.name: 'triangle-center' is a built-in"):
        load_tree(path)
    stem = tmp_path / "pairwise-min.json"
    stem.write_text(json.dumps({"comparisons": [{"name": "c", "order": 1}]}))
    with pytest.raises(InputError, match="stem"):
        load_tree(stem)


def test_cheap_is_recomputed_not_echoed():
    doc = _pairwise_witness()
    assert doc["cheap"] is True
    doc["cheap"] = False
    report = check_document("w", as_file(doc), proofs=False)
    assert not report.valid and report.errors[0].startswith("$.cheap: stated false")
    grows = predict(builtin_target("pairwise-min"), Architecture(8, heads=(1,))).witness.to_json()
    report = check_document("w", as_file(grows), proofs=False)
    assert report.valid and report.bounded is False
    grows["cheap"] = True
    assert not check_document("w", as_file(grows), proofs=False).valid


def _certified(doc: dict) -> list[str]:
    report = check_document("w", as_file(doc), proofs=True)
    assert report.valid, report.errors
    return [c["statement"] for c in report.certified if c["kind"] != "derivation"]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_statement_predict_writes_is_certified_by_the_checkers_own_query(data):
    """The checker's encoding (check.py) and the search's (search.py) are written apart: on
    random targets and architectures every lower bound the search proves, the checker proves
    again from the tree and architecture alone."""
    target = data.draw(targets)
    arch = data.draw(architectures(target))
    p = predict(target, arch)
    assert _certified(_witness_document(target, arch, p.witness, p.proofs)) == \
        [q.claim for q in p.proofs]


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(targets, st.integers(1, 3), st.booleans())
def test_every_min_heads_and_depth_statement_is_certified(target, layers, positional):
    T = max(8, target.min_T())
    m = min_heads(target, T, layers, positional=positional)
    assert _certified(_witness_document(target, m.arch, m.witness, m.proofs)) == \
        [q.claim for q in m.proofs]
    r = depth(target, T, positional=positional)
    assert _certified(_witness_document(target, r.arch, r.witness, r.proofs)) == \
        [q.claim for q in r.proofs]


def test_the_pareto_statement_is_certified_and_a_false_one_is_not():
    """min-heads' pareto statement (4 heads in all are the least, at or above 2,1,1) is built
    and proved by the checker; the same statement at 5 heads in all is false ((1, 2, 2) has 5
    and is not at or above (2, 1, 1)): z3 says sat on the checker's query."""
    from test_predictions import _chains
    target = _chains()
    m = min_heads(target, 16, 3)
    doc = _witness_document(target, m.arch, m.witness, m.proofs)
    pareto = doc["proofs"][-1]
    assert (pareto["kind"], pareto["total"], pareto["vectors"]) == ("pareto", 4, [[2, 1, 1]])
    assert _certified(doc) == [p.claim for p in m.proofs]
    pareto.update(total=5, claim=pareto["claim"].replace("at most 4", "at most 5"))
    report = check_document("w", as_file(doc), proofs=True)
    assert not report.valid and "z3 says sat on the checker's query" in report.errors[0]
    del pareto["vectors"]
    with pytest.raises(InputError, match=r"\$\.proofs\[3\]\.vectors"):
        check_document("w", as_file(doc), proofs=True)
