"""Comparison trees: built-ins, the JSON format, and validation naming file and JSON path."""
import json

import pytest

from tfcert.errors import InputError
from tfcert.infoflow import Architecture, load_tree, parse_target, predict, replay
from tfcert.main import main


def test_builtin_measures():
    tri = parse_target("triangle-center")
    assert (tri.order, tri.dimension, tri.comparison_number(6)) == (3, 1, 20)
    idim = parse_target("intrinsic-dim:D=4")
    assert (idim.order, idim.dimension, idim.comparison_number(5)) == (2, 4, 40)
    kth = parse_target("kth-largest:k=3,n=2").comparisons[0]
    assert (kth.order, kth.rank, kth.key_dim) == (1, 3, 2)


def write(tmp_path, data):
    path = tmp_path / "tree.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_user_tree_behaves_like_the_builtin(tmp_path):
    path = write(tmp_path, {"name": "two", "comparisons": [
        {"name": "a", "order": 2}, {"name": "b", "order": 2, "reduce": "max"}]})
    target = load_tree(path)
    arch = Architecture(16, heads=(2, 2))
    p = predict(target, arch)
    assert p.efficient and p.exponent == 1 and replay(target, arch, p.witness).ok
    assert not predict(target, arch.with_heads((1, 2))).efficient


@pytest.mark.parametrize("data,needle", [
    ("[1", "$: invalid JSON at line 1"),
    ([], "$: expected an object"),
    ({"comparisons": []}, "$.comparisons: expected a non-empty list"),
    ({"comparisons": [{"name": "a"}]}, "$.comparisons[0]: missing required key 'order'"),
    ({"comparisons": [{"name": "a", "order": 0}]}, "$.comparisons[0].order: expected an integer"),
    ({"comparisons": [{"name": "a", "order": 2, "rank": "x"}]}, "$.comparisons[0].rank"),
    ({"comparisons": [{"name": "a", "order": 2}, {"name": "a", "order": 1}]},
     "$.comparisons[1].name: duplicate"),
    ({"comparisons": [{"name": "1a", "order": 2}]}, "$.comparisons[0].name: expected an identifier"),
    ({"comparisons": [{"name": "a", "order": 2, "reduce": "sum"}]}, "$.comparisons[0].reduce"),
    ({"comparisons": [{"name": "a", "order": 2, "colour": 1}]}, "$.comparisons[0]: unknown key"),
    ({"combine": "prod", "comparisons": [{"name": "a", "order": 2}]}, "$.combine"),
])
def test_malformed_tree_names_file_and_path(tmp_path, capsys, data, needle):
    path = write(tmp_path, data)
    with pytest.raises(InputError, match="tree.json"):
        load_tree(path)
    rc = main(["infoflow", "predict", "--target", path, "--T", "8", "--heads", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"{path}: {needle}" in err
