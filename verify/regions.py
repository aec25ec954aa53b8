"""Claims over whole regions, decided by z3 in exact rational arithmetic.

A group of FF units sharing one U row w acts on x only through t = w·x, so a
statement "for every x with t in some set" is a statement about one real t:
z3 is asked for a counterexample t, and the claim holds when there is none.
"""
from __future__ import annotations

import z3
from flint import fmpq

from tfcert.verify.formats import FF


def q(x: fmpq) -> z3.ArithRef:
    return z3.RealVal(f"{x.p}/{x.q}")


def hidden(ff: FF, units: tuple[int, ...], t: z3.ArithRef) -> list[z3.ArithRef]:
    """σ(t + b_j) for each unit of the group."""
    return [z3.If(t + q(ff.b[j]) > 0, t + q(ff.b[j]), z3.RealVal(0)) for j in units]


def counterexample(t: z3.ArithRef, *constraints, what: str) -> str | None:
    """None if the constraints are unsatisfiable (the claim holds), else why not."""
    solver = z3.Solver()
    solver.add(*constraints)
    result = solver.check()
    if result == z3.unsat:
        return None
    if result == z3.sat:
        return f"z3: {what} at t = {solver.model()[t]}"
    return f"z3 could not decide whether {what}"


def zero_outside(ff: FF, units: tuple[int, ...], lo: fmpq, hi: fmpq) -> str | None:
    """Whether the group adds exactly 0 wherever t ≤ lo or t ≥ hi. Output
    coordinate i is Σ_j W[i][j] σ_j; proportional rows vanish together, so
    each direction of row is asked once."""
    rows = set()
    for w_row in ff.W:
        coeffs = [w_row[j] for j in units]
        lead = next((c for c in coeffs if c != 0), None)
        if lead is not None:
            rows.add(tuple(c / lead for c in coeffs))
    if not rows:
        return None
    t = z3.Real("t")
    h = hidden(ff, units, t)
    nonzero = [z3.Sum([q(c) * v for c, v in zip(row, h)]) != 0 for row in sorted(rows)]
    return counterexample(t, z3.Or(t <= q(lo), t >= q(hi)), z3.Or(nonzero),
                          what="the group is non-zero outside its window")
