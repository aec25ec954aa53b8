"""Information-set propagation rules: residual monotonicity and each mode's gain."""
from hypothesis import given, settings, strategies as st

import pytest

from tfcert.errors import InputError
from tfcert.infoflow.propagation import (Aggregate, Positional, Retrieve, class_sets,
                                         initial_sets, step)
from tfcert.infoflow.witness import HeadPlan, HeadUse


@st.composite
def runs(draw):
    T = draw(st.integers(1, 8))
    layers = []
    for _ in range(draw(st.integers(1, 3))):
        actions = {}
        for p in range(1, T + 2):
            kinds = draw(st.lists(st.sampled_from(["max", "global", "pos"]), max_size=2))
            actions[p] = [Retrieve(draw(st.integers(1, T))) if k == "max" else Aggregate()
                          if k == "global" else Positional(frozenset(draw(
                              st.sets(st.integers(1, T), min_size=1)))) for k in kinds]
        layers.append(actions)
    return T, layers


@settings(max_examples=40, deadline=None)
@given(runs())
def test_residual_makes_information_sets_monotone(run):
    T, layers = run
    sets = initial_sets(T)
    for actions in layers:
        new = step(sets, actions, positional=True)
        assert all(old <= cur <= frozenset(range(1, T + 2)) for old, cur in zip(sets, new))
        sets = new


def test_each_mode_gains_what_the_rule_says():
    sets = step(initial_sets(4), {1: [Retrieve(3)]})
    assert sets[0] == {1, 3} and sets[4] == {5}
    sets = step(sets, {5: [Retrieve(1)], 2: [Positional(frozenset({1, 4}))]}, positional=True)
    assert sets[4] == {5, 1, 3} and sets[1] == {2, 1, 3, 4}
    assert step(sets, {3: [Aggregate()]})[2] == {1, 2, 3, 4}


def test_position_specific_aggregation_needs_positional_encoding():
    with pytest.raises(InputError):
        step(initial_sets(3), {1: [Positional(frozenset({2}))]})
    with pytest.raises(InputError):
        step(initial_sets(3), {1: [Retrieve(4)]})  # the readout is not an attention source


def test_class_sets_follow_retrievals_and_aggregation():
    plans = ((HeadPlan("max", HeadUse("anchor", "c")),),
             (HeadPlan("max", None, HeadUse("resolve", "c")),),
             (HeadPlan("global"),))
    info = class_sets(plans)
    assert info[1] == (("t", "s1.1(t)"), ("T+1",))
    assert info[2][1] == ("T+1", "s2.1(T+1)", "s1.1(s2.1(T+1))")
    assert info[3] == (("1..T",), ("T+1", "1..T"))


def test_positional_heads_and_the_union_form():
    from tfcert.infoflow.propagation import class_generators
    plans = ((HeadPlan("pos", positions=(3,)),),
             (HeadPlan("max", HeadUse("anchor", "c"), HeadUse("copy", None)),))
    info = class_sets(plans)
    assert info[1] == (("3", "t"), ("3", "T+1"))
    # I(s, 1) = {3, s} for the retrieved s: position 3 is already in it
    assert info[2] == (("3", "t", "s2.1(t)"), ("3", "T+1", "s2.1(T+1)"))
    assert class_generators(plans)[2] == (("I(t,1)", "I(s2.1(t),1)"),
                                          ("I(T+1,1)", "I(s2.1(T+1),1)"))
    deep = tuple((HeadPlan("max", HeadUse("anchor", "c")),) for _ in range(14))
    assert class_sets(deep, cap=4096) is None and len(class_sets(deep)[13][0]) == 2 ** 13
