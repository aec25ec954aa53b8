"""One verdict rule for every experiment (experiments/verdict.py): the measured trend against
InfoFlow's exponent for each exact architecture, and an under-trained run is inconclusive, never
"agrees". The summaries need no torch; InfoFlow's predictions need z3 (a core dependency)."""
from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfcert.experiments import cost_law, depth, intrinsic_dim, triangle, verdict
from tfcert.experiments.verdict import AGREES, DISAGREES, FALL, INCONCLUSIVE, RATIO, Cell, compare, judge, pairs


def _flat(value: float) -> list[list[float]]:
    return [[100, value * 1.5], [200, value * 1.2], [300, value * 1.02], [400, value]]


def _falling(value: float) -> list[list[float]]:
    return [[100, value * 8], [200, value * 4], [300, value * 2], [400, value]]


def _cell(label: str, e, values, falling: bool = False) -> Cell:
    curve = _falling if falling else _flat
    return Cell.of(label, None if e is None else Fraction(e), [{"nmse": v, "curve": curve(v)} for v in values])


# --- the rule ---------------------------------------------------------------------------------

def test_rule_on_hand_made_cells():
    low, high = _cell("a", 0, [1e-3, 1.1e-3]), _cell("b", 1, [1e-2, 1.2e-2])
    assert judge(pairs([low, high]), [low, high]) == AGREES
    assert judge(pairs([high, low]), [high, low]) == AGREES  # order does not matter
    tie = _cell("c", 1, [5e-2])  # same exponent as b, 5x apart: a predicted tie fails
    assert not compare(high, tie).holds and judge(pairs([high, tie]), [high, tie]) == DISAGREES
    assert compare(high, _cell("d", 1, [2e-2])).holds
    overlap = _cell("e", 1, [1e-3, 1e-1])  # 10x apart on average, but one seed overlaps
    assert not compare(low, overlap).holds
    unreachable = _cell("f", None, [0.9])  # no derivation: above every exponent
    assert compare(high, unreachable).holds and compare(high, unreachable).what.startswith("b")
    assert judge([], [low]) == INCONCLUSIVE  # nothing compared


def test_under_trained_is_inconclusive_never_agrees():
    low, high = _cell("a", 0, [1e-3]), _cell("b", 1, [1e-2], falling=True)
    assert compare(low, high).holds and judge(pairs([low, high]), [low, high]) == INCONCLUSIVE
    wrong = _cell("c", 1, [1e-3], falling=True)  # fails, but is still training
    assert judge(pairs([low, wrong]), [low, wrong]) == INCONCLUSIVE
    no_curve = Cell.of("g", Fraction(1), [{"nmse": 1e-2}])  # one value cannot show a flat curve
    assert no_curve.under_trained() and judge(pairs([low, no_curve]), [low, no_curve]) == INCONCLUSIVE


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(1e-6, 1.0), st.floats(1.0, 20.0)), min_size=2, max_size=5))
def test_a_cell_still_falling_never_agrees(cells):
    """Whatever the numbers: a verdict is 'agrees' only when every cell fell by at most FALL over
    its last checkpoint interval, and 'does not agree' only with a failed check between trained cells."""
    built = [Cell(f"c{i}", Fraction(e), (v,), ((v * f, v),)) for i, (e, v, f) in enumerate(cells)]
    checks = pairs(built)
    word = judge(checks, built)
    if any(f > FALL for _, _, f in cells):
        assert word != AGREES
    if word == DISAGREES:
        assert any(c.conclusive and not c.holds for c in checks)
    assert word in (AGREES, DISAGREES, INCONCLUSIVE)


def test_every_experiment_uses_the_one_rule():
    for module in (intrinsic_dim, depth, triangle, cost_law):
        assert module.judge is verdict.judge and verdict.CRITERION in module.CRITERION
    assert all(module.summary is verdict.summary for module in (intrinsic_dim, depth, triangle, cost_law))
    assert RATIO == 3.0 and FALL == 1.1  # the stated constants; changing them changes the docs


# --- the experiments under the rule -------------------------------------------------------------

def _triangle(nmse_at, curve=_flat) -> list[dict]:
    return [{"experiment": "triangle", "model": "h=4,4 E=64", "T": T, "heads": [4, 4], "shape": {"E": 64},
             "seed": s, "steps": 800, "nmse": nmse_at[T], "curve": curve(nmse_at[T])}
            for T in (4, 8, 16, 32) for s in (0, 1, 2)]


RISING = {4: 4.1e-2, 8: 1.9e-1, 16: 8.7e-1, 32: 9.6e-1}  # the GPU run's geometric means


def test_triangle_rising_where_the_exponent_is_zero_does_not_agree():
    """At h = (4, 4), E = 64 InfoFlow's exponent is 0 at every T up to 32: a 23x rise contradicts
    it (the depth experiment counts the same situation as a failure). The old criterion said 'agrees'."""
    result = triangle.summarise(_triangle(RISING), False, "cpu")
    assert [r["prediction"]["exponent"] for r in result.rows if "T" in r] == ["0"] * 4
    assert result.rows[-1]["verdict"] == DISAGREES
    assert result.verdict.startswith("h=4,4 E=64: does not agree")


def test_triangle_still_falling_is_inconclusive():
    result = triangle.summarise(_triangle(RISING, _falling), False, "cpu")
    assert result.rows[-1]["verdict"] == INCONCLUSIVE and "agrees" not in result.verdict


def test_depth_level_one_layer_where_its_exponent_grows_does_not_agree():
    """E = 4, d = 2: the one-layer exponent is 1 at T = 4 and 7 at T = 16, the two-layer one 0."""
    def records(one):
        return [{"experiment": "depth", "E": 4, "size": 16, "T": T, "layers": n, "seed": 0, "parameters": 600 + n,
                 "nmse": (1e-3 if n == 2 else one(T)), "curve": _flat(1e-3 if n == 2 else one(T))}
                for T in (4, 16) for n in (1, 2)]
    assert depth.summarise(records(lambda T: 1e-2 * T), False, "cpu").rows[-1]["verdict"] == AGREES
    assert depth.summarise(records(lambda T: 0.8), False, "cpu").rows[-1]["verdict"] == DISAGREES


def _intrinsic(nmse, E=24, lengths=(8, 16), curve=_flat) -> list[dict]:
    return [{"experiment": "intrinsic-dim", "variant": "v", "ablation": False, "D": 2, "T": T, "pattern": p,
             "seed": s, "steps": 4000, "nmse": nmse(p, T), "curve": curve(nmse(p, T)), "shape": {"E": E}}
            for T, p, s in itertools.product(lengths, ("D,D", "D-1,D", "D-1,D-1"), (0, 1, 2))]


def test_intrinsic_verdict_follows_the_exponents():
    """At E = 24 one head fewer has exponent 1/3 at T = 8 and 5/3 at T = 16: (D,D) level and well
    below, the fewer-heads patterns rising with T, agrees; fewer-heads level in T does not."""
    def rising(p, T):
        return 1e-3 if p == "D,D" else 1e-2 * (T // 8) ** 2
    rows = intrinsic_dim.summarise(_intrinsic(rising), False, "cpu").rows
    assert rows[0]["exponent"] == {"D,D": "0", "D-1,D": "1/3", "D-1,D-1": "1/3"}
    assert rows[-1]["verdict"] == AGREES
    rows = intrinsic_dim.summarise(_intrinsic(lambda p, T: 1e-3 if p == "D,D" else 4e-2), False, "cpu").rows
    assert rows[-1]["verdict"] == DISAGREES
    falling = intrinsic_dim.summarise(_intrinsic(rising, curve=_falling), False, "cpu")
    assert falling.rows[-1]["verdict"] == INCONCLUSIVE


def test_intrinsic_separation_where_the_calculus_predicts_none_does_not_agree():
    """At E = 64, T <= 16 every pattern has exponent 0: the old criterion called a 1000x gap separated."""
    result = intrinsic_dim.summarise(_intrinsic(lambda p, T: 1e-5 if p == "D,D" else 1e-2, E=64), False, "cpu")
    assert result.rows[0]["exponent"] == {"D,D": "0", "D-1,D": "0", "D-1,D-1": "0"}
    assert result.rows[-1]["verdict"] == DISAGREES


# --- the grids ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("grid", intrinsic_dim.GRIDS)
def test_grids_are_where_the_calculus_separates_the_patterns(grid):
    """Every (D, T) of each grid: (D,D) has exponent 0, every pattern with one head fewer a larger one."""
    from tfcert.experiments.prediction import exponent

    variants = intrinsic_dim.CPU_GRID if grid == "cpu" else intrinsic_dim.GPU_GRID
    for v in variants:
        for D, T in itertools.product(v.dims, v.lengths):
            e = {p: exponent(f"intrinsic-dim:D={D}", T, 4, v.shape.E, intrinsic_dim.heads(p, D)) for p in v.patterns}
            assert e["D,D"] == 0 and all(e[p] > 0 for p in v.patterns if p != "D,D"), (grid, D, T, e)
    jobs = intrinsic_dim.grid_jobs(grid)
    assert len({j.name for j in jobs}) == len(jobs)
    assert len(jobs) == (6 if grid == "cpu" else 1)  # CPU: one per T and seed; GPU: one bank
