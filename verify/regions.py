"""Claims over whole regions, decided by z3 in exact rational arithmetic.

A group of FF units sharing one U row w acts on x only through t = w·x, so a
statement "for every x with t in some set" is a statement about one real t:
z3 is asked for a counterexample t, and the claim holds when there is none.
"""
from __future__ import annotations

from functools import lru_cache

import z3
from flint import fmpq

from tfcert.verify.formats import FF
from tfcert.verify.numbers import LIMITS


def q(x: fmpq) -> z3.ArithRef:
    return z3.RealVal(f"{x.p}/{x.q}")


def hidden(ff: FF, units: tuple[int, ...], t: z3.ArithRef) -> list[z3.ArithRef]:
    """σ(t + b_j) for each unit of the group."""
    return [z3.If(t + q(ff.b[j]) > 0, t + q(ff.b[j]), z3.RealVal(0)) for j in units]


def solve(t: z3.ArithRef, *constraints) -> tuple[str, object]:
    """("unsat", None), ("sat", a value of t: fmpq when rational) or
    ("unknown", None) when z3 gives no answer within LIMITS.z3_seconds."""
    solver = z3.Solver()
    solver.set("timeout", max(1, int(LIMITS.z3_seconds * 1000)))
    solver.add(*constraints)
    result = solver.check()
    if result != z3.sat:
        return ("unsat" if result == z3.unsat else "unknown"), None
    value = solver.model().eval(t, model_completion=True)
    if z3.is_rational_value(value):
        value = fmpq(value.numerator_as_long(), value.denominator_as_long())
    return "sat", value


def explain(answer: tuple[str, object], what: str, at=lambda value: value) -> str | None:
    """None when the claim holds, else why not; ``at`` maps the value of z3's
    variable to the t the claim speaks of."""
    status, value = answer
    if status == "unsat":
        return None
    if status == "sat":
        return f"z3: {what} at t = {at(value) if isinstance(value, fmpq) else value}"
    return f"undecided: z3 gave no answer within z3_seconds={LIMITS.z3_seconds} whether {what}"


def counterexample(t: z3.ArithRef, *constraints, what: str) -> str | None:
    """None if the constraints are unsatisfiable (the claim holds), else why not."""
    return explain(solve(t, *constraints), what)


def zero_outside(ff: FF, units: tuple[int, ...], lo: fmpq, hi: fmpq) -> str | None:
    """Whether the group adds exactly 0 wherever t ≤ lo or t ≥ hi.

    Output coordinate i is Σ_j W[i][j] σ(t + b_j); proportional rows vanish
    together, so each direction of row is asked once. With t = lo + s·(hi − lo)
    and hi > lo, σ(t + b_j) = (hi − lo)·σ(s + (lo + b_j)/(hi − lo)): the claim is
    the same statement about s outside (0, 1). That exact change of variables
    makes every hat of one shape the same query, which z3 answers once."""
    rows = set()
    for w_row in ff.W:
        coeffs = [w_row[j] for j in units]
        lead = next((c for c in coeffs if c != 0), None)
        if lead is not None:
            rows.add(tuple(c / lead for c in coeffs))
    if not rows:
        return None
    if hi <= lo:
        return f"empty window ({lo}, {hi})"
    offsets = tuple((lo + ff.b[j]) / (hi - lo) for j in units)
    return explain(_zero_outside_unit(tuple(sorted(rows)), offsets), "the group is non-zero outside its window",
                   at=lambda s: lo + s * (hi - lo))


@lru_cache(maxsize=4096)
def _zero_outside_unit(rows: tuple[tuple[fmpq, ...], ...], offsets: tuple[fmpq, ...]) -> tuple[str, object]:
    """Σ_j row_j σ(s + offset_j) = 0 for every s ∉ (0, 1), for each row."""
    s = z3.Real("s")
    h = [z3.If(s + q(o) > 0, s + q(o), z3.RealVal(0)) for o in offsets]
    nonzero = [z3.Sum([q(c) * v for c, v in zip(row, h)]) != 0 for row in rows]
    return solve(s, z3.Or(s <= 0, s >= 1), z3.Or(nonzero))
