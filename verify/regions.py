"""Claims over whole regions, decided by z3 in exact rational arithmetic.

A group of FF units sharing one U row w acts on x only through t = w·x, so a
statement "for every x with t in some set" is a statement about one real t:
z3 is asked for a counterexample t, and the claim holds when there is none.

Each statement is "f_row(s) = 0 for every s in a set" for a few rows, with
f_row(s) linear in the row. It then holds for every row exactly when it holds
for every row of their span's reduced echelon basis, and a counterexample s
for a basis row is one for some row. So z3 is asked about that basis: groups
whose rows span the same space (every snap of a construction) ask once.
"""
from __future__ import annotations

from functools import lru_cache

import z3
from flint import fmpq, fmpq_mat

from tfcert.verify.formats import FF
from tfcert.verify.numbers import LIMITS, key

Rows = tuple[tuple[fmpq, ...], ...]
# Who else sees each query (--emit-smt, --cross-check; docs/certificates.md): callables
# (claim, what, SMT-LIB2 text, z3's answer) returning a failure, which fails the claim, or None.
OBSERVERS: list = []
ASKING = None  # the claim whose check is running (check.py sets it): whose queries observers see


class _Keyed(tuple):
    """A tuple of rationals, or of such tuples, as a cache key hashed by numerators and
    denominators (numbers.key): hashing an fmpq goes through fractions.Fraction, ten times slower."""

    def __hash__(self) -> int:
        return hash(tuple(key(v) if isinstance(v, tuple) else (v.p, v.q) for v in self))


def q(x: fmpq) -> z3.ArithRef:
    return z3.RealVal(f"{x.p}/{x.q}")


def basis(rows: list[tuple[fmpq, ...]]) -> Rows:
    """The reduced row echelon basis of the rows' span (python-flint's rref)."""
    reduced, rank = fmpq_mat([list(r) for r in rows]).rref()
    return tuple(tuple(reduced[i, j] for j in range(reduced.ncols())) for i in range(rank))


def solve(s: z3.ArithRef, observed: bool, *constraints) -> tuple[str, object, str | None]:
    """("unsat", None), ("sat", a value of s: fmpq when rational) or
    ("unknown", None) when z3 gives no answer within LIMITS.z3_seconds; then,
    where OBSERVERS will read it (``observed``), the query's SMT-LIB2 text (z3
    prints rationals exactly, as (/ p q)); else None: printing a query of large
    numbers costs as much as deciding it."""
    solver = z3.SolverFor("QF_LRA")
    solver.set("timeout", max(1, int(LIMITS.z3_seconds * 1000)))
    solver.add(*constraints)
    result = solver.check()
    text = "(set-logic QF_LRA)\n" + solver.to_smt2() if observed else None
    if result != z3.sat:
        return ("unsat" if result == z3.unsat else "unknown"), None, text
    value = solver.model().eval(s, model_completion=True)
    if z3.is_rational_value(value):
        value = fmpq(value.numerator_as_long(), value.denominator_as_long())
    return "sat", value, text


def explain(answer: tuple[str, object, str], what: str, at) -> str | None:
    """None when the claim holds, else why not; ``at`` maps the value of z3's
    variable s to the t the claim speaks of."""
    status, value, text = answer
    for observe in OBSERVERS:
        if problem := observe(ASKING, what, text, status):
            return problem
    if status == "unsat":
        return None
    if status == "sat":
        return f"z3: {what} at t = {at(value) if isinstance(value, fmpq) else value}"
    return f"undecided: z3 gave no answer within z3_seconds={LIMITS.z3_seconds} whether {what}"


def _relus(s: z3.ArithRef, offsets: tuple[fmpq, ...]) -> list[z3.ArithRef]:
    """σ(s + o) for each offset."""
    return [z3.If(s + q(o) > 0, s + q(o), z3.RealVal(0)) for o in offsets]


def zero_outside(ff: FF, units: tuple[int, ...], lo: fmpq, hi: fmpq) -> str | None:
    """Whether the group adds exactly 0 wherever t ≤ lo or t ≥ hi.

    Output coordinate i is Σ_j W[i][j] σ(t + b_j). With t = lo + s·(hi − lo)
    and hi > lo, σ(t + b_j) = (hi − lo)·σ(s + (lo + b_j)/(hi − lo)): the claim is
    the same statement about s outside (0, 1), for the basis of the rows
    W[i][units]. That exact change of variables makes every group of one
    shape the same query, which z3 answers once."""
    rows = basis([tuple(w_row[j] for j in units) for w_row in ff.W])
    if not rows:
        return None
    if hi <= lo:
        return f"empty window ({lo}, {hi})"
    offsets = tuple((lo + ff.b[j]) / (hi - lo) for j in units)
    return explain(_zero_outside_unit(_Keyed(rows), _Keyed(offsets), bool(OBSERVERS)),
                   "the group is non-zero outside its window",
                   at=lambda s: lo + s * (hi - lo))


def ramps_to(ff: FF, units: tuple[int, ...], lo: fmpq, hi: fmpq, above: tuple[fmpq, ...]) -> str | None:
    """Whether the group adds exactly 0 wherever t ≤ lo and exactly ``above``
    wherever t ≥ hi (a hat that also moves every token past its window).
    With t = lo + s·(hi − lo) as in zero_outside, each side is a statement
    about the rows (W[i][units], −above_i/(hi − lo)) on (σ(s + offset_j)…, 1);
    both sides are asked, and each failure is reported."""
    if hi <= lo:
        return f"empty window ({lo}, {hi})"
    offsets = tuple((lo + ff.b[j]) / (hi - lo) for j in units)
    problems = []
    for past, target, what in ((False, (fmpq(0),) * len(above), "the group is not zero below its window"),
                               (True, above, "the group is not the stated move above its window")):
        rows = basis([tuple(w_row[j] for j in units) + (-a / (hi - lo),) for w_row, a in zip(ff.W, target)])
        if rows and (problem := explain(_zero_on_side(_Keyed(rows), _Keyed(offsets), past, bool(OBSERVERS)), what,
                                        at=lambda s: lo + s * (hi - lo))):
            problems.append(problem)
    return "; ".join(problems) or None


@lru_cache(maxsize=4096)
def _zero_on_side(rows: Rows, offsets: tuple[fmpq, ...], above: bool, observed: bool) -> tuple:
    """Σ_j w_j σ(s + offset_j) + c = 0 for every s ≥ 1 (``above``) or every s ≤ 0, for each row (w…, c)."""
    s = z3.Real("s")
    terms = _relus(s, offsets) + [z3.RealVal(1)]
    nonzero = [z3.Sum([q(c) * v for c, v in zip(row, terms)]) != 0 for row in rows]
    return solve(s, observed, s >= 1 if above else s <= 0, z3.Or(nonzero))


@lru_cache(maxsize=4096)
def _zero_outside_unit(rows: Rows, offsets: tuple[fmpq, ...], observed: bool) -> tuple:
    """Σ_j row_j σ(s + offset_j) = 0 for every s ∉ (0, 1), for each row."""
    s = z3.Real("s")
    h = _relus(s, offsets)
    nonzero = [z3.Sum([q(c) * v for c, v in zip(row, h)]) != 0 for row in rows]
    return solve(s, observed, z3.Or(s <= 0, s >= 1), z3.Or(nonzero))


def lands_on(ff: FF, units: tuple[int, ...], k: int, center: fmpq, radius: fmpq, to: tuple[fmpq, ...]) -> str | None:
    """Whether η·t·e_k + Σ_j W[:, j] σ(t + b_j) = ``to`` for every t with
    |t − center| ≤ radius (radius > 0): the layer's formula on the axis with
    only the group's units.

    With t = c + r·s: row i is [i = k]·η·r·s + Σ_j r·W_ij σ(s + (c + b_j)/r)
    + [i = k]·η·c − to_i, a row (a, r·W_i, c_i) of coefficients of
    (s, σ(s + o_j) …, 1), to be 0 for every s ∈ [−1, 1]."""
    c, r, eta = center, radius, ff.eta
    rows = basis([((eta * r if i == k else fmpq(0)),) + tuple(r * w_row[j] for j in units)
                  + ((eta * c if i == k else fmpq(0)) - to[i],) for i, w_row in enumerate(ff.W)])
    if not rows:
        return None
    offsets = tuple((c + ff.b[j]) / r for j in units)
    return explain(_lands_on_unit(_Keyed(rows), _Keyed(offsets), bool(OBSERVERS)),
                   f"a token t·e_{k + 1} on the plateau misses the target", at=lambda s: c + r * s)


@lru_cache(maxsize=4096)
def _lands_on_unit(rows: Rows, offsets: tuple[fmpq, ...], observed: bool) -> tuple:
    """a·s + Σ_j w_j σ(s + offset_j) + c = 0 for every s ∈ [−1, 1], for each row (a, w…, c)."""
    s = z3.Real("s")
    terms = [s] + _relus(s, offsets) + [z3.RealVal(1)]
    nonzero = [z3.Sum([q(c) * v for c, v in zip(row, terms)]) != 0 for row in rows]
    return solve(s, observed, s >= -1, s <= 1, z3.Or(nonzero))
