"""What ``infoflow check`` certifies, and the fields it recomputes instead of echoing."""
import json

from tfcert.infoflow import Architecture, builtin_target, check_document, load_tree, predict
from tfcert.verify.formats import parse_document
import pytest
from tfcert.errors import InputError


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
