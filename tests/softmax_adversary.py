"""An adversarial float run of one block — an FF layer, then softmax
attention with ρ = 0 and V = I, so that the output is the attention mean
itself — for red-team tests of the softmax part of the float analysis.
Every operation is emulated exactly and rounded once; the adversary takes
every freedom docs/float.md leaves: the score form (dense Â or low-rank,
query or key side first, or scale·⟨x̂_i, x̂_l⟩ + Σ (v·x̂_i)(u·x̂_l)), the order
of every sum (forward, reverse, random, FMA chain), normalising before or
after the weighted sum, and each exp value at either end of its 2 ulps
(relative 4u; 2 subnormal spacings below the normal range), pushed up for
the tokens on one side of the exact mean's coordinate and down for the rest.

``ratios`` compares each run with the analysis's own per-token bounds (what
it carries into later layers), not only with the final claim: the error of
each output token, and the magnitude of each attention mean (what the
attention output's rounding is scaled by)."""
from __future__ import annotations

import itertools
from math import inf
from fractions import Fraction as F

from flint import arb, ctx, fmpq

from floatemu import ORDERS, Arithmetic
from floatforms import exp_within

from tfcert.verify.evaluate import Replay
from tfcert.verify.float_analysis import Analysis
from tfcert.verify.floats import FORMATS
from tfcert.verify.formats import parse_document, read_model
from tfcert.canonical import dumps
from tfcert.verify.layers import apply_ff

FORMS = ("dense_q", "dense_k", "lr_q", "lr_k", "lr_sum")


def s(x) -> str:
    x = F(x)
    return f"{x.numerator}/{x.denominator}"


def q(x) -> fmpq:
    x = F(x)
    return fmpq(x.numerator, x.denominator)


def model(d: int, scale, terms, tau, ff=((), (), None)):
    """One block: FF η = 1 with (U, b, W) (none by default), SA ρ = 0, A = scale·I + Σ u vᵀ, V = I."""
    U, b, W = ff
    W = W if W is not None else [[] for _ in range(d)]
    blk = {"ff": {"eta": "1", "U": [[s(x) for x in r] for r in U], "b": [s(x) for x in b],
                  "W": [[s(x) for x in r] for r in W]},
           "sa": {"rho": "0", "A": {"scale": s(scale), "low_rank": [{"u": [s(a) for a in u], "v": [s(b) for b in v]}
                                                                    for u, v in terms]},
                  "V": {"scale": "1", "low_rank": []}}}
    m = {"format": "tfcert.model/1", "d": d, "attention": "softmax", "temperature": s(tau), "blocks": [blk]}
    return read_model(parse_document("m.json", dumps(m)))


class Recorded(Analysis):
    """The analysis, keeping the last softmax layer's (error, magnitude) bounds of each attention mean."""

    def _softmax(self, *args):
        self.means = super()._softmax(*args)
        return self.means


def analysis(mdl, seq, fmt: str, cls=Recorded):
    """The analysis stepped over the exact replay of one sequence."""
    inputs = [tuple(tuple(q(v) for v in t) for t in seq)]
    an = cls(mdl, inputs, FORMATS[fmt])
    for step in Replay(mdl, inputs).steps():
        an.step(step)
    an.finish()
    return an


def _exact_score(A, xi, xl) -> fmpq:
    total = A.scale * sum((a * b for a, b in zip(xi, xl)), fmpq(0))
    for u, v in A.terms:
        total += sum((a * b for a, b in zip(v, xi)), fmpq(0)) * sum((a * b for a, b in zip(u, xl)), fmpq(0))
    return total


def exact_means(mdl, seq) -> list[list[arb]]:
    """The exact attention means, as arb balls at 400 bits."""
    A, tau = mdl.blocks[0].sa.A, mdl.temperature
    X = [list(apply_ff(mdl.blocks[0].ff, tuple(q(v) for v in t))) for t in seq]
    out = []
    with ctx.workprec(400):
        for xi in X:
            sc = [_exact_score(A, xi, xl) for xl in X]
            best = max(sc)
            w = [arb((v - best) / tau).exp() for v in sc]
            total = sum(w, arb(0))
            out.append([sum((wl * xl[c] for wl, xl in zip(w, X)), arb(0)) / total for c in range(len(xi))])
    return out


class Run(Arithmetic):
    """The arithmetic of one float run (tests/floatemu.py), with exp at either end of its 2 ulps."""

    def exp(self, t: fmpq, push: int) -> fmpq:
        return exp_within(t, self.fmt, push)


def _ff(ff, x, run: Run) -> list:
    """η x + W relu(U x + b) in the run's arithmetic."""
    r, one = run.r, fmpq(1)
    h = [max(run.dot(list(zip([r(v) for v in row], x)) + [(r(bk), one)]), fmpq(0)) for row, bk in zip(ff.U, ff.b)]
    return [run.dot([(r(ff.eta), x[i])] + list(zip([r(v) for v in ff.W[i]], h))) for i in range(len(x))]


def _scores(form: str, run: Run, A, M, X, xi) -> list:
    """The float scores of query xi against every token, in one of the score forms."""
    d, sc = len(xi), run.r(A.scale)
    U = [[run.r(a) for a in u] for u, _ in A.terms]
    V = [[run.r(b) for b in v] for _, v in A.terms]
    if form == "dense_q":
        qv = [run.dot([(M[c][j], xi[j]) for j in range(d)]) for c in range(d)]
        return [run.dot([(qv[c], xl[c]) for c in range(d)]) for xl in X]
    if form == "dense_k":
        return [run.dot([(run.dot([(M[c][j], xl[c]) for c in range(d)]), xi[j]) for j in range(d)]) for xl in X]
    if form == "lr_q":
        cf = [run.dot(list(zip(v, xi))) for v in V]
        qv = [run.dot([(sc, xi[c])] + [(u[c], k) for u, k in zip(U, cf)]) for c in range(d)]
        return [run.dot([(qv[c], xl[c]) for c in range(d)]) for xl in X]
    if form == "lr_k":
        out = []
        for xl in X:
            cf = [run.dot(list(zip(u, xl))) for u in U]
            kv = [run.dot([(sc, xl[c])] + [(v[c], k) for v, k in zip(V, cf)]) for c in range(d)]
            out.append(run.dot([(kv[c], xi[c]) for c in range(d)]))
        return out
    cq = [run.dot(list(zip(v, xi))) for v in V]  # scale·⟨x̂_i, x̂_l⟩ + Σ (v·x̂_i)(u·x̂_l)
    return [run.dot([(sc, run.dot(list(zip(xi, xl))))] + list(zip(cq, [run.dot(list(zip(u, xl))) for u in U])))
            for xl in X]


def float_means(mdl, seq, fmt: str, form: str, order: str, after: bool, push, seed: int = 0) -> list:
    """The float run's attention means; ``push(i, l)``: token l's exp push in query i's row."""
    run = Run(fmt, order, seed)
    r, one = run.r, fmpq(1)
    A, tau = mdl.blocks[0].sa.A, r(mdl.temperature)
    X = [_ff(mdl.blocks[0].ff, [r(q(v)) for v in t], run) for t in seq]
    d = len(X[0])
    U = [[r(a) for a in u] for u, _ in A.terms]
    V = [[r(b) for b in v] for _, v in A.terms]
    M = [[run.dot([(r(A.scale) if c == j else fmpq(0), one)] + [(u[c], v[j]) for u, v in zip(U, V)])
          for j in range(d)] for c in range(d)] if form.startswith("dense") else None
    out = []
    for i, xi in enumerate(X):
        Z = [r(v / tau) for v in _scores(form, run, A, M, X, xi)]
        top = max(Z)
        E = [run.exp(r(z - top), push(i, l)) for l, z in enumerate(Z)]
        total = run.dot([(e, one) for e in E])
        if after:
            out.append([r(run.dot([(e, xl[c]) for e, xl in zip(E, X)]) / total) for c in range(d)])
        else:
            p = [r(e / total) for e in E]
            out.append([run.dot([(pl, xl[c]) for pl, xl in zip(p, X)]) for c in range(d)])
    return out


def ratios(mdl, seq, fmt: str, rows=None, coords=None, forms=FORMS, orders=ORDERS, seeds=(0,)) -> dict:
    """(query, coordinate) → the largest |m̂ − m| over the runs divided by the
    analysis's bound for that token and coordinate (inf where the bound is 0
    and the run is not exact), and ("magnitude", query, coordinate) → the
    largest |m̂| over the analysis's bound on it; the runs push exp for ``rows`` × ``coords``
    (every one by default) both ways, and not at all. The analysis must prove
    a bound (AssertionError otherwise)."""
    an = analysis(mdl, seq, fmt)
    assert an.failure is None, an.failure
    exact = exact_means(mdl, seq)
    X = [list(apply_ff(mdl.blocks[0].ff, tuple(q(v) for v in t))) for t in seq]
    n, d = len(seq), len(X[0])
    plans = [lambda i, l: 0]
    with ctx.workprec(400):
        for i, c, sign in itertools.product(range(n) if rows is None else rows, range(d) if coords is None else coords,
                                            (1, -1)):
            side = [1 if sign * (arb(x[c]) - exact[i][c]) > 0 else -1 for x in X]
            plans.append(lambda row, l, i=i, side=side: side[l] if row == i else 0)
    out: dict = {}
    for form, order, after, seed, plan in itertools.product(forms, orders, (False, True), seeds, plans):
        got = float_means(mdl, seq, fmt, form, order, after, plan, seed)
        with ctx.workprec(400):
            for i, c in itertools.product(range(n), range(d)):
                dev = abs(arb(got[i][c]) - exact[i][c])
                hi = float(dev.mid() + dev.rad())
                bound = float(an.err[i][c])
                ratio = hi / bound if bound else (float("inf") if hi > 0 else 0.0)
                out[i, c] = max(out.get((i, c), 0.0), ratio)
                size, mag = abs(float(got[i][c])), an.means[i][1][c]
                ratio = size / mag if size <= mag else (size / mag if mag else inf) + 2 ** -52  # > 1 when above
                out["magnitude", i, c] = max(out.get(("magnitude", i, c), 0.0), ratio)
    return out
