"""The paper's four predictions, each witness replayed and each proof re-run."""
from fractions import Fraction

import pytest

from tfcert.infoflow import (Architecture, builtin_target, min_heads, predict, recheck, replay,
                             theorem2_exponent, theorem3_exponent)


def checked(spec, arch):
    """Predict, then demand the witness replays and the minimality query is unsat again."""
    target = builtin_target(spec)
    p = predict(target, arch)
    assert p.witness is not None
    report = replay(target, arch, p.witness)
    assert report.ok, report.errors
    assert recheck(p.proof) == "unsat"
    return p


@pytest.mark.parametrize("T", [2, 8, 16, 64])
def test_depth_separation_one_layer_grows_linearly(T):
    p = checked("pairwise-min", Architecture(T, heads=(1,)))
    assert p.exponent == T - 1  # T*d/E - 1 with d = E = 1
    assert not p.efficient
    assert p.witness.dominant.law == "Theorem 3, T0 = T"


@pytest.mark.parametrize("T", [2, 8, 16, 64])
def test_depth_separation_two_layers_one_head_is_eps_minus_one(T):
    p = checked("pairwise-min", Architecture(T, heads=(1, 1)))
    assert p.exponent == 1 and p.efficient
    modes = [[h.mode for h in layer] for layer in p.witness.plans]
    assert modes == [["max"], ["max"]]


@pytest.mark.parametrize("T,k,n", [(8, 2, 1), (16, 3, 1), (64, 2, 3), (20, 5, 2)])
def test_theorem2_rate_is_what_one_layer_pays_for_kth_largest(T, k, n):
    p = checked(f"kth-largest:k={k},n={n}", Architecture(T, heads=(1,)))
    assert p.exponent == theorem2_exponent(T, k, n) == Fraction(T - k - 1, n + 1)
    assert not p.efficient


def test_theorem2_and_3_formulas():
    assert theorem2_exponent(10, 2, 1) == Fraction(7, 2)
    assert theorem3_exponent(3, 2, 4) == Fraction(1, 2)
    assert theorem3_exponent(2, 1, 1) == 1


@pytest.mark.parametrize("T,d,E", [(8, 2, 4), (16, 1, 3), (64, 3, 2)])
def test_theorem3_rate_for_a_global_aggregate(T, d, E):
    p = checked("pairwise-min", Architecture(T, d, E, (2,)))
    assert p.exponent == max(0, theorem3_exponent(T, d, E))


def test_kth_largest_with_k_one_is_cheap():
    p = checked("kth-largest:k=1", Architecture(32, heads=(1,)))
    assert p.efficient and p.exponent == 0


@pytest.mark.parametrize("D", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("T", [8, 16, 64])
def test_intrinsic_dimension_needs_D_heads_in_layer_one(D, T):
    target = builtin_target(f"intrinsic-dim:D={D}")
    m = min_heads(target, T, 2)
    assert m.min_heads == (D, D)
    assert replay(target, m.arch, m.witness).ok
    first = m.proofs[0]
    assert first.layer == 1 and first.heads == (D - 1, None)  # layer 2: any number of heads
    assert "for every T >= 2" in first.claim
    assert all(recheck(p.smt2) == "unsat" for p in m.proofs)


@pytest.mark.parametrize("heads,E", [((1,), 1), ((3, 3), 1), ((6, 6, 6), 8), ((2, 2, 2, 2), 64)])
def test_triangle_center_is_never_efficient(heads, E):
    small = checked("triangle-center", Architecture(16, 1, E, heads))
    large = checked("triangle-center", Architecture(256, 1, E, heads))
    assert not small.efficient and not large.efficient
    assert large.exponent > small.exponent  # grows with T whatever (L, h, E)
    m = min_heads(builtin_target("triangle-center"), 16, len(heads), 1, E)
    assert m.min_heads is None and recheck(m.proofs[0].smt2) == "unsat"


def test_one_layer_lower_bound_holds_for_every_larger_T():
    """Theorem 1's one-layer side as one query: T is a variable, T >= 16, and no derivation
    has an exponent below T*d/E - 1 = T - 1."""
    p = checked("pairwise-min", Architecture(16, heads=(1,)))
    every = [q for q in p.proofs if q.claim.startswith("for every T >= 16")]
    assert len(every) == 1 and "max(0, T - 1" in every[0].claim
    assert "(declare-fun T () Int)" in every[0].smt2 and recheck(every[0].smt2) == "unsat"
    claims = [q.claim for q in p.proofs]
    assert "no T-bounded derivation with heads [1], for every T >= 2" in claims
    assert "no T-bounded derivation with 1 layer(s) and any number of heads, for every T >= 2" \
        in claims


def test_kth_largest_exponent_for_every_larger_T():
    """One layer, k = 2, n = 1: the k-th retrieval (T-3)/2 beats global aggregation T-1 from
    T = 2 on, so for every T >= 8 nothing is below max(0, (T-3)/2)."""
    p = checked("kth-largest:k=2", Architecture(8, heads=(1,)))
    every = [q for q in p.proofs if q.claim.startswith("for every T >= 8")]
    assert every and "1/2*T - 3/2" in every[0].claim and recheck(every[0].smt2) == "unsat"


def test_no_heads_at_all_suffice_for_the_triangle():
    m = min_heads(builtin_target("triangle-center"), 9, 3)
    assert m.min_heads is None and m.proofs[0].heads == (None, None, None)
    assert "any number of heads, for every T >= 3" in m.proofs[0].claim


def _chains():
    from tfcert.infoflow import Combine, Reduce, Score, Target
    from tfcert.infoflow.targets import alternation
    two = Reduce("min", ("u",), Reduce("max", ("v",), Score("h", ("u", "v"))), name="b1")
    return Target("chains", tree=Combine("max", (alternation(3), two)))


def test_min_heads_lists_the_pareto_set_by_total_and_says_its_order():
    """max(a depth-3 chain, a depth-2 chain) on 3 layers: the lexicographic least heads are
    (1, 2, 2), 5 in all, though (2, 1, 1) reaches the target with 4; both are Pareto-minimal,
    listed by total, and 4 is proved the least total."""
    from tfcert.infoflow.search import ORDER
    target = _chains()
    m = min_heads(target, 16, 3)
    assert m.min_heads == (1, 2, 2) and ORDER.startswith("lexicographic")
    assert m.pareto == ((2, 1, 1), (1, 2, 2)) and m.least_total == 4 and m.complete
    for heads in m.pareto:
        p = predict(target, Architecture(16, heads=heads))
        assert p.efficient and replay(target, p.arch, p.witness).ok
    assert [p.kind for p in m.proofs] == ["fewer_heads"] * 3 + ["pareto"]
    last = m.proofs[-1]
    assert (last.total, last.vectors) == (4, ((2, 1, 1),))
    assert "at most 4 head(s) in all (3 layer(s)) has heads at or above one of 2,1,1" in last.claim
    assert all(recheck(p.smt2) == "unsat" for p in m.proofs)
    assert not predict(target, Architecture(16, heads=(2, 1, 0))).efficient


def test_when_the_budget_runs_out_the_least_total_is_not_claimed(monkeypatch):
    """With no resources for the Pareto search, only the lexicographic answer is listed and no
    least total or pareto statement is claimed."""
    from tfcert.infoflow import search
    monkeypatch.setattr(search, "PARETO_FLOOR", 0)
    monkeypatch.setattr(search, "PARETO_SHARE", 10 ** 12)
    m = min_heads(_chains(), 16, 3)
    assert m.pareto == ((1, 2, 2),) and m.least_total is None and not m.complete
    assert [p.kind for p in m.proofs] == ["fewer_heads"] * 3
