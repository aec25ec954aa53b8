"""Comparison trees: built-ins, the JSON format, and validation naming file and JSON path."""
import json
from math import comb

import pytest
from hypothesis import given, strategies as st

from tfcert.errors import InputError
from tfcert.infoflow import (Architecture, Comparison, Target, builtin_target, load_tree,
                             parse_target, predict, replay)
from tfcert.cli.main import main


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
    ("[1", "malformed JSON at line 1"),
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
    ({"comparisons": [{"name": "a", "order": 2}], "tree": {}}, "$: give either"),
    ({"tree": {"op": "avg", "of": []}}, "$.tree.op: expected"),
    ({"tree": {"op": "sum", "of": []}}, "$.tree.of: expected a non-empty list"),
    ({"tree": {"op": "min", "over": "t", "of": {"op": "score", "name": "f", "args": ["s"]}}},
     "$.tree.of.args[0]: variable 's' is not bound"),
    ({"tree": {"op": "min", "over": "t", "of": {"op": "score", "name": "f", "args": ["t", "t"]}}},
     "$.tree.of.args[1]: 't' appears twice"),
    ({"tree": {"op": "min", "over": ["t", "s"], "of": {"op": "score", "name": "f", "args": ["t"]}}},
     "$.tree.over: variable 's' is bound but no score"),
    ({"tree": {"op": "min", "over": "t", "of": {"op": "max", "over": "t", "of": {
        "op": "score", "name": "f", "args": ["t"]}}}}, "$.tree.of.over: variable 't' is already"),
    ({"tree": {"op": "min", "over": "t", "of": {"op": "score", "name": "f", "args": ["t", 0]}}},
     "$.tree.of.args[1]: a fixed position"),
    ({"tree": {"op": "min", "over": "t", "rank": 0, "of": {"op": "score", "name": "f",
                                                            "args": ["t"]}}}, "$.tree.rank"),
    ({"tree": {"op": "sum", "of": [{"op": "comparison", "name": "a", "order": 2},
                                   {"op": "min", "over": "t", "name": "a", "of": {
                                       "op": "score", "name": "f", "args": ["t"]}}]}},
     "$.tree.of[1].name: duplicate name 'a'"),
    ({"tree": {"op": "score", "name": "f", "args": [1], "colour": 2}}, "$.tree: unknown key"),
])
def test_malformed_tree_names_file_and_path(tmp_path, capsys, data, needle):
    path = write(tmp_path, data)
    with pytest.raises(InputError, match="tree.json"):
        load_tree(path)
    rc = main(["infoflow", "predict", "--target", path, "--T", "8", "--heads", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and needle in err and err.startswith(f"error: {path}")


def test_tree_format_round_trips_and_measures(tmp_path):
    """min_t max_s f(t, s) + the comparison b: β' = 2 (pairs compared at once), β1 = 2 (the
    root combines two reductions), comparison number at T = 5: the outer min compares 5 tokens,
    the inner max 4 candidates for each of 5 values of t, b C(5, 2) = 10 pairs: 5 + 20 + 10."""
    data = {"name": "mixed", "tree": {"op": "sum", "of": [
        {"op": "min", "over": "t", "of": {"op": "max", "over": "s", "of": {
            "op": "score", "name": "f", "args": ["t", "s"]}}},
        {"op": "comparison", "name": "b", "order": 2}]}}
    target = load_tree(write(tmp_path, data))
    assert (target.order, target.dimension, target.comparison_number(5)) == (2, 2, 35)
    again = load_tree(write(tmp_path, target.to_json()))
    assert again == target
    names = sorted(n.name for n in target.calc.reductions())
    assert names == ["b", "g_b", "r1", "r2"]


def test_flat_combine_min_and_max(tmp_path):
    """min(a, b) of two pairwise comparisons: the readout needs both values, like a sum."""
    target = load_tree(write(tmp_path, {"combine": "min", "comparisons": [
        {"name": "a", "order": 2}, {"name": "b", "order": 2}]}))
    p = predict(target, Architecture(16, heads=(2, 2)))
    assert p.efficient and p.exponent == 1
    assert not predict(target, Architecture(16, heads=(1, 2))).efficient


def test_tree_depth_and_size_are_bounded(tmp_path):
    node = {"op": "score", "name": "f", "args": [1]}
    for _ in range(70):
        node = {"op": "sum", "of": [node]}
    with pytest.raises(InputError, match="nested deeper than 64"):
        load_tree(write(tmp_path, {"tree": node}))


def test_check_fits_names_reductions_and_positions():
    from tfcert.infoflow import Reduce, Score, Target
    t = Target("x", tree=Reduce("max", ("t",), Score("f", ("t", 9))))
    with pytest.raises(InputError, match="fixed position 9"):
        t.check_fits(8)
    t = Target("y", tree=Reduce("max", ("t",), Reduce("min", ("s",), Score("f", ("t", "s")),
                                                      rank=3)))
    assert t.min_T() == 4
    with pytest.raises(InputError, match="keeps rank 3 but only 2 candidates"):
        t.check_fits(3)


@pytest.mark.parametrize("data,needle", [
    ({"comparisons": [{"name": "a", "order": 33}]}, "$.comparisons[0].order: at most 32"),
    ({"comparisons": [{"name": "a", "order": 2, "rank": 10 ** 3000}]}, "keeps rank"),
    ({"tree": {"op": "min", "over": "t", "of": {"op": "score", "name": "f", "args": ["t"]},
               "rank": 10 ** 3000}}, "keeps rank"),
])
def test_huge_values_fail_fast_with_one_line(tmp_path, capsys, data, needle):
    path = write(tmp_path, data)
    rc = main(["infoflow", "predict", "--target", path, "--T", "8", "--heads", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and needle in err and len(err) < 300


def test_expanded_comparisons_count_towards_the_depth_limit(tmp_path):
    node = {"op": "comparison", "name": "c", "order": 32}
    for i in range(20):  # 41 levels as written, 73 once the comparison is 32 reductions
        node = {"op": "min", "over": f"v{i}", "of": {"op": "sum", "of": [
            node, {"op": "score", "name": "f", "args": [f"v{i}"]}]}}
    with pytest.raises(InputError, match="levels deep, more than 64"):
        load_tree(write(tmp_path, {"tree": node}))


def test_equivalent_trees_have_one_comparison_number():
    """min_t min_s f(t, s), min over {t, s} and the flat comparison compare the same token
    pairs: C(16, 2) = 120 each (the nested form counted 16 + 16*15 = 256)."""
    from tfcert.infoflow import Combine, Reduce, Score
    nested = Target("n", tree=Reduce("min", ("t",), Reduce("min", ("s",), Score("f", ("t", "s")))))
    pairs = Target("p", tree=Reduce("min", ("t", "s"), Score("f", ("t", "s"))))
    flat = builtin_target("pairwise-min")
    assert nested.comparison_number(16) == pairs.comparison_number(16) == flat.comparison_number(16) == 120
    summed = Target("s", tree=Combine("sum", (Combine("sum", (nested.tree, pairs.tree)), flat.root)))
    assert summed.comparison_number(16) == 360
    mixed = Target("m", tree=Reduce("min", ("t",), Reduce("max", ("s",), Score("f", ("t", "s")))))
    assert mixed.comparison_number(16) == 256  # min of max: a different target, not merged


@given(st.integers(1, 5), st.integers(5, 40), st.sampled_from(["min", "max"]))
def test_a_chain_of_like_reductions_counts_as_one_comparison(order, T, op):
    from tfcert.infoflow import Reduce, Score
    vs = tuple(f"v{i}" for i in range(order))
    node = Score("f", vs)
    for v in reversed(vs):
        node = Reduce(op, (v,), node)
    chain = Target("chain", tree=node)
    flat = Target("flat", (Comparison("c", order, reduce=op),))
    assert chain.comparison_number(T) == flat.comparison_number(T) == comb(T, order)
