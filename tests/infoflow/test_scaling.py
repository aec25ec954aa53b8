"""Sizes the first encoding could not reach are answered (with proofs and a checked witness);
the timings are a benchmark, ``python tests/infoflow/bench_scaling.py``, not a test."""
import pytest

from tfcert.infoflow import (Architecture, Comparison, Target, builtin_target, check_document,
                             min_heads, predict, recheck)


def test_intrinsic_dimension_ten():
    m = min_heads(builtin_target("intrinsic-dim:D=10"), 64, 2)
    assert m.min_heads == (10, 10)
    assert [p.heads for p in m.proofs] == [(9, None), (10, 9), (None, None)]
    assert m.pareto == ((10, 10),) and m.least_total == 20 and m.complete
    assert all(recheck(p.smt2) == "unsat" for p in m.proofs)


@pytest.mark.slow
def test_two_hundred_comparisons():
    target = Target("flat200", tuple(Comparison(f"c{i}", 2) for i in range(200)))
    assert min_heads(target, 64, 2).min_heads == (200, 200)
    p = predict(target, Architecture(64, heads=(200, 200)))
    assert p.exponent == 1 and p.efficient
    assert check_document("w", p.witness.to_json(), proofs=False).valid


def test_four_layers_of_six():
    p = predict(builtin_target("intrinsic-dim:D=6"), Architecture(64, heads=(6, 6, 6, 6)))
    assert p.exponent == 1 and p.efficient


def test_the_same_query_writes_the_same_witness():
    """Each encoding has its own z3 context: earlier queries do not change the model."""
    target = builtin_target("intrinsic-dim:D=4")
    first = predict(target, Architecture(16, heads=(4, 4, 4))).witness.to_json()
    predict(builtin_target("alternation:k=3"), Architecture(16, heads=(2, 2, 2)))
    assert predict(target, Architecture(16, heads=(4, 4, 4))).witness.to_json() == first
