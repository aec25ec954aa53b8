"""Every witness z3 finds replays; corrupted witnesses do not."""
import dataclasses
from fractions import Fraction

from hypothesis import given, settings, strategies as st

from tfcert.infoflow import (Architecture, Comparison, HeadPlan, HeadUse, Target, min_heads,
                             predict, replay)

comparisons = st.builds(
    Comparison, name=st.sampled_from(["a", "b", "c"]), order=st.integers(1, 3),
    rank=st.sampled_from([1, 1, 2]), key_dim=st.integers(1, 3))
targets = st.lists(comparisons, min_size=1, max_size=3, unique_by=lambda c: c.name).map(
    lambda cs: Target("random", tuple(cs)))
architectures = st.builds(Architecture, T=st.integers(4, 40), d=st.integers(1, 3),
                          E=st.integers(1, 4), heads=st.lists(st.integers(0, 3), min_size=1,
                                                              max_size=3).map(tuple))


@settings(max_examples=25, deadline=None)
@given(targets, architectures)
def test_every_witness_found_replays(target, arch):
    p = predict(target, arch)
    if p.witness is None:
        return
    report = replay(target, arch, p.witness)
    assert report.ok, report.errors
    assert report.exponent == p.exponent


def _corruptions(w):
    """Each kind of tampering the replay must notice."""
    first = next((l, h) for l, layer in enumerate(w.plans) for h, p in enumerate(layer)
                 if p.mode != "off")
    l, h = first

    def replace_plan(plan):
        layers = [list(x) for x in w.plans]
        layers[l][h] = plan
        return dataclasses.replace(w, plans=tuple(tuple(x) for x in layers))

    plan = w.plans[l][h]
    yield dataclasses.replace(w, exponent=w.exponent + Fraction(1, 2))
    yield dataclasses.replace(w, exponent=w.exponent - 1) if w.exponent >= 1 else \
        dataclasses.replace(w, exponent=Fraction(-1))
    yield dataclasses.replace(w, info=w.info[:-1] + ((w.info[-1][0] + ("s9.9(t)",), w.info[-1][1]),))
    yield dataclasses.replace(w, facts=w.facts[:1] + w.facts[1:-1] + (
        (w.facts[-1][0] + ("g_zzz(t)",), w.facts[-1][1]),))
    yield replace_plan(HeadPlan("kth" if plan.mode == "max" else "max", plan.tok, plan.out))
    yield replace_plan(HeadPlan("off"))
    yield dataclasses.replace(w, plans=w.plans[:-1] + (w.plans[-1][:-1],)) if w.plans[-1] else \
        dataclasses.replace(w, plans=w.plans[:-1])
    yield replace_plan(HeadPlan(plan.mode, HeadUse("resolve", "nope"), plan.out))


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["pairwise-min", "intrinsic-dim:D=2", "kth-largest:k=2",
                        "triangle-center", "kth-largest:k=1"]),
       st.integers(3, 64), st.data())
def test_replay_rejects_every_corruption(spec, T, data):
    from tfcert.infoflow import builtin_target
    target = builtin_target(spec)
    arch = Architecture(T, heads=(2, 2))
    w = predict(target, arch).witness
    assert replay(target, arch, w).ok
    bad = data.draw(st.sampled_from(list(_corruptions(w))))
    assert not replay(target, arch, bad).ok


def test_replay_rejects_a_witness_for_another_architecture():
    from tfcert.infoflow import builtin_target
    target = builtin_target("pairwise-min")
    w = predict(target, Architecture(8, heads=(1, 1))).witness
    assert not replay(target, Architecture(9, heads=(1, 1)), w).ok


def test_min_heads_witness_is_cheap_and_replays():
    from tfcert.infoflow import builtin_target
    target = builtin_target("pairwise-min")
    m = min_heads(target, 12, 3)
    assert m.min_heads == (0, 1, 1) and m.witness.cheap  # layer 1 is minimised first
    assert replay(target, m.arch, m.witness).ok


def test_replay_is_independent_of_z3_and_the_search():
    import ast
    import inspect
    from tfcert.infoflow import replay as module
    tree = ast.parse(inspect.getsource(module))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(n == "z3" or n.endswith("search") for n in names)


def test_no_heads_means_no_derivation_and_an_unsat_proof():
    from tfcert.infoflow import builtin_target, recheck
    p = predict(builtin_target("pairwise-min"), Architecture(8, heads=(0, 0)))
    assert p.witness is None and not p.efficient and recheck(p.proof) == "unsat"
