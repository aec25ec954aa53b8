"""The region query's change of variables (t = lo + s·(hi − lo)) decides the
same statement as the direct query over t."""
from __future__ import annotations

import pytest
import z3
from flint import fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

from tfcert.verify.formats import FF
from tfcert.verify.regions import q, zero_outside

small = st.fractions(-4, 4, max_denominator=4).map(lambda f: fmpq(f.numerator, f.denominator))


def direct(ff: FF, lo: fmpq, hi: fmpq) -> bool:
    """True when z3 finds t ∉ (lo, hi) with a non-zero output coordinate."""
    t = z3.Real("t")
    h = [z3.If(t + q(b) > 0, t + q(b), z3.RealVal(0)) for b in ff.b]
    out = [z3.Sum([q(w) * v for w, v in zip(row, h)]) != 0 for row in ff.W]
    solver = z3.Solver()
    solver.add(z3.Or(t <= q(lo), t >= q(hi)), z3.Or(out))
    return solver.check() == z3.sat


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(small, min_size=1, max_size=4).flatmap(lambda b: st.tuples(
    st.just(b), st.lists(st.lists(small, min_size=len(b), max_size=len(b)), min_size=2, max_size=2),
    small, st.fractions(1, 4, max_denominator=4))), st.booleans())
def test_normalised_query_agrees_with_the_direct_one(case, hat_like):
    b, W, lo, width = case
    if hat_like:  # make zero-outside actually happen: Σ W_j = 0 and Σ W_j b_j = 0 for a 3-unit hat
        b, W = [-lo, -lo - fmpq(1, 2), -lo - 1], [[fmpq(1), fmpq(-2), fmpq(1)], [fmpq(3), fmpq(-6), fmpq(3)]]
    hi = lo + fmpq(width.numerator, width.denominator)
    units = tuple(range(len(b)))
    ff = FF(fmpq(1), tuple((fmpq(1),) for _ in b), tuple(b), tuple(tuple(row) for row in W))
    assert (zero_outside(ff, units, lo, hi) is not None) == direct(ff, lo, hi)
