"""Nested comparison trees. Every expected answer is derived by hand in the test's docstring
from the rules of docs/infoflow.md; each witness is checked by the independent checker and each
proof re-run."""
from fractions import Fraction

import pytest

from tfcert.infoflow import (Architecture, builtin_target, check_document, depth, min_heads,
                             predict, recheck, target_from_json)


def tree(node: dict, name: str = "tree"):
    return target_from_json(f"{name}.json", {"name": name, "tree": node})


def score(name, *args):
    return {"op": "score", "name": name, "args": list(args)}


def red(op, var, of, **kw):
    return {"op": op, "over": var, "of": of, **kw}


def total(*nodes):
    return {"op": "sum", "of": list(nodes)}


def valid(witness):
    report = check_document("<witness>", witness.to_json(), proofs=False)
    assert report.valid, report.errors
    return witness


def all_unsat(proofs):
    assert all(recheck(p.smt2) == "unsat" for p in proofs)


DEPTH2 = total(red("min", "t", total(score("f", "t"), red("max", "s", score("g", "t", "s")))),
               red("max", "u", score("h", "u")))


def test_depth_two_tree_with_a_shared_head():
    """y = min_t [f(t) + max_s g(t, s)] + max_u h(u).

    * R(t) = max_s g(t, s) has one free variable: each token gets it by one max retrieval (the
      score g(t, s) reads t and the candidate s), in some layer l.
    * The outer min scores candidates t by f(t) + R(t), both known at t once R(t) is, so the
      readout's retrieval must come in a layer after l: 2 layers are needed (depth 2).
    * max_u h(u) has order 1: h(u) is known at u from the start; one retrieval at T+1, any layer.
    * Least heads, layer 1 first: R must be anchored in layer 1 (h1 >= 1), and that head is free
      at T+1, where it resolves max_u h: h1 = 1. Layer 2: the readout resolves the min: h2 = 1.
    * Exponent: each retrieval and the readout decode values of at most 2 tokens (g(t, s*),
      then f(t*) + g(t*, s*(t*))): 2 d/E - 1 = 1 (d = E = 1); with E = 2 it is 0.
    * One layer: only global aggregation (T0 = T) reaches the readout: T d/E - 1 = 15 at T = 16.
    """
    target = tree(DEPTH2)
    m = min_heads(target, 16, 2)
    assert m.min_heads == (1, 1)
    (shared,), (last,) = valid(m.witness).plans
    assert (shared.tok.role, shared.tok.node) == ("anchor", "r2")
    assert (shared.out.role, shared.out.node) == ("resolve", "r3")
    assert (last.out.role, last.out.node) == ("resolve", "r1")
    all_unsat(m.proofs)
    assert [p.heads for p in m.proofs] == [(0, None), (1, 0), (None, None)]
    assert valid(predict(target, Architecture(16, heads=(1, 1))).witness).exponent == 1
    assert predict(target, Architecture(16, 1, 2, (1, 1))).exponent == 0
    one = predict(target, Architecture(16, heads=(3,)))
    assert one.exponent == 15 and not one.efficient
    assert depth(target, 16).depth == 2


DEPTH3 = red("min", "t1", red("max", "t2", total(
    score("f2", "t1", "t2"), red("min", "t3", score("f3", "t2", "t3"), name="a3")), name="a2"),
    name="a1")


def test_depth_three_min_max_min_tree():
    """y = min_{t1} max_{t2} [f2(t1, t2) + min_{t3} f3(t2, t3)] (alternation:k=3).

    * a3(t2) = min_{t3} f3(t2, t3): one free variable, one max retrieval at every token:
      layer 1 at the earliest.
    * a2(t1) = max_{t2} [f2(t1, t2) + a3(t2)]: the head at t1 scores candidate t2 by f2 (t1's
      and t2's tokens) plus a3(t2), which t2 must already hold: layer 2 at the earliest.
    * a1 = min_{t1} a2(t1): the readout scores candidates by a2, held from state 2: layer 3.
    * So depth 3, one head per layer; each step decodes 2 tokens: exponent 1 (d = E = 1).
    * With 2 layers, with any number of heads, some value must come from full information
      (global aggregation): exponent T d/E - 1, 15 at T = 16, growing with T.
    * I(T+1, 3) = {T+1} + I(s3.1(T+1), 2), and I(t, 2) = {t, s1.1(t), s2.1(t), s1.1(s2.1(t))}.
    """
    target = tree(DEPTH3)
    assert target.calc.to_json() == builtin_target("alternation:k=3").calc.to_json()
    r = depth(target, 16)
    assert (r.depth, r.min_heads) == (3, (1, 1, 1))
    w = valid(r.witness)
    assert [s.fact for s in w.steps] == ["a3(t)", "a2(t)", "a1", "y"] and w.exponent == 1
    assert set(w.info[3][1]) == {"T+1", "s3.1(T+1)", "s1.1(s3.1(T+1))", "s2.1(s3.1(T+1))",
                                 "s1.1(s2.1(s3.1(T+1)))"}
    assert r.fewer.arch.layers == 2 and r.fewer.exponent == 15 and not r.fewer.efficient
    all_unsat(r.proofs)
    assert "no T-bounded derivation with 2 layer(s)" in r.proofs[0].claim
    for T in (8, 64):
        assert predict(target, Architecture(T, heads=(1, 1, 1))).exponent == 1
        assert predict(target, Architecture(T, heads=(4, 4))).exponent == T - 1


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_depth_k_needs_k_layers(k):
    """The depth separation generalised: alternation:k is a chain of k reductions, each reading
    the one below at the candidate, so each needs its own layer: depth k, one head per layer,
    exponent 2 d/E - 1 = 1 (k = 1: one order-1 retrieval, 1 d/E - 1 = 0); one layer fewer, with
    any number of heads, pays T d/E - 1."""
    r = depth(builtin_target(f"alternation:k={k}"), 12)
    assert r.depth == k and r.min_heads == (1,) * k
    assert valid(r.witness).exponent == (0 if k == 1 else 1)
    if k > 1:
        assert r.fewer.exponent == 11 and not r.fewer.efficient
        assert recheck(r.proofs[0].smt2) == "unsat"


def test_min_max_alternation():
    """y = min_t max_s f(t, s) + max_t min_s g(t, s): each term is a depth-2 chain (anchor at t,
    then resolve at T+1), exactly like pairwise-min whatever the min/max order.

    * 2 layers: layer 1 anchors both inner reductions at t (2 uses at t: 2 heads), layer 2
      resolves both at T+1 (2 heads): least heads (2, 2); exponent 2 d/E - 1 = 1.
    * (1, 2): layer 1 can anchor only one of them, the other has no earlier layer: not
      T-bounded; the cheapest derivation decodes one from full information: T - 1 = 15.
    * one layer: T - 1 = 15.
    """
    target = tree(total(red("min", "t", red("max", "s", score("f", "t", "s"))),
                        red("max", "t", red("min", "s", score("g", "t", "s")))))
    m = min_heads(target, 16, 2)
    assert m.min_heads == (2, 2) and valid(m.witness).exponent == 1
    all_unsat(m.proofs)
    short = predict(target, Architecture(16, heads=(1, 2)))
    assert short.exponent == 15 and not short.efficient
    assert predict(target, Architecture(16, heads=(4,))).exponent == 15
    alone = tree(red("min", "t", red("max", "s", score("f", "t", "s"))))
    for heads, e in (((1,), 15), ((1, 1), 1)):
        assert predict(alone, Architecture(16, heads=heads)).exponent == e
        assert predict(builtin_target("pairwise-min"), Architecture(16, heads=heads)).exponent == e


FIRST = red("max", "t", score("f", "t", 1))


def test_positional_target():
    """y = max_t f(t, x_1): the best match for the token at position 1.

    * Without positional encoding the network is permutation-equivariant and cannot single out
      position 1: no derivation, at any depth (the proof says so for every T).
    * With it: layer 1, a position-specific head attends to position 1 (every position gains
      I(1, 0) = {1}); layer 2, the readout retrieves argmax_t f(t, x_1), scored from t's token
      and x_1: least heads (1, 1), depth 2, exponent 2 d/E - 1 = 1.
    * One layer with positional encoding: global aggregation then decoding (position 1 is
      identifiable): T d/E - 1 = 15 at T = 16.
    """
    target = tree(FIRST)
    none = predict(target, Architecture(16, heads=(2, 2)))
    assert none.witness is None and "no derivation reaches" in none.proof_claim
    assert recheck(none.proof) == "unsat"
    assert depth(target, 16).depth is None
    m = min_heads(target, 16, 2, positional=True)
    assert m.min_heads == (1, 1)
    (pos,), (ret,) = valid(m.witness).plans
    assert pos.mode == "pos" and pos.positions == (1,) and ret.out.node == "r1"
    assert m.witness.info[1] == (("1", "t"), ("1", "T+1"))
    assert depth(target, 16, positional=True).depth == 2
    one = predict(target, Architecture(16, heads=(1,), positional=True))
    assert one.exponent == 15 and not one.efficient and valid(one.witness)


def test_fixed_positions_only():
    """y = f(x_1, x_2): one position-specific head brings both tokens to the readout, which
    decodes a function of 2 tokens: one layer, one head, exponent 2 d/E - 1 = 1; d = 2, E = 8:
    max(0, 4/8 - 1) = 0."""
    target = tree(score("f", 1, 2))
    p = predict(target, Architecture(16, heads=(1,), positional=True))
    assert valid(p.witness).exponent == 1 and p.efficient
    assert predict(target, Architecture(16, 2, 8, (1,), True)).exponent == 0
    assert predict(target, Architecture(16, heads=(1,))).witness is None


def test_rank_two_inside_a_tree():
    """y = max_t secondbest_s f(t, s): the inner reduction keeps rank 2, so its anchor is a
    k-th retrieval (Theorem 2, k = 2, n = 1): (T - k - 1)/(n + 1) = 13/2 at T = 16, below global
    aggregation's T - 1 = 15; not T-bounded."""
    target = tree(red("max", "t", red("max", "s", score("f", "t", "s"), rank=2)))
    p = predict(target, Architecture(16, heads=(1, 1)))
    assert p.exponent == Fraction(13, 2) and not p.efficient
    assert [[h.mode for h in layer] for layer in valid(p.witness).plans] == [["kth"], ["max"]]


def test_closed_subtree_inside_a_reduction():
    """y = min_t [f(t) + max_s g(s)]: C = max_s g(s) is closed; the readout's candidates need
    C, so every token resolves it first (layer 1), then the readout resolves the min (layer 2):
    (1, 1); with 3 layers the lexicographic least is (0, 1, 1)."""
    target = tree(red("min", "t", total(score("f", "t"), red("max", "s", score("g", "s")))))
    assert min_heads(target, 16, 2).min_heads == (1, 1)
    m = min_heads(target, 16, 3)
    assert m.min_heads == (0, 1, 1) and valid(m.witness)
