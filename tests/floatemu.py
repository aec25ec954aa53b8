"""An exact emulation of a model's float run, one correctly rounded
operation at a time, in any of the formats the float claim speaks about and
in the evaluation orders it covers: every dot product and sum accumulated
first to last, last to first, in a random order, or as a fused multiply-add
chain (each a·b + acc rounded once). The test side of the float claim — the
verifier never runs floats; numpy cannot run bfloat16 nor choose an order.

Rounding is tfcert.verify.floats.round_nearest on the exact rational result,
so each operation is the IEEE one (ties to even, gradual underflow); exp is
rounded from a 200-bit value (correctly rounded but for the rarest ties)."""
from __future__ import annotations

import random

import mpmath
from flint import fmpq

from tfcert.verify.floats import FORMATS, round_nearest
from tfcert.verify.formats import LowRank, Model

ORDERS = ("forward", "reverse", "random", "fma")


class Arithmetic:
    def __init__(self, fmt: str, order: str, seed: int = 0):
        self.fmt, self.order, self.rng = FORMATS[fmt], order, random.Random(seed)

    def r(self, q: fmpq) -> fmpq:
        return round_nearest(q, self.fmt)

    def dot(self, pairs: list[tuple[fmpq, fmpq]]) -> fmpq:
        """Σ a·b over the pairs (already numbers of the format), in this order."""
        pairs = list(pairs)
        if self.order == "reverse":
            pairs.reverse()
        elif self.order == "random":
            self.rng.shuffle(pairs)
        if not pairs:
            return fmpq(0)
        acc = self.r(pairs[0][0] * pairs[0][1])
        for a, b in pairs[1:]:
            acc = self.r(a * b + acc) if self.order == "fma" else self.r(self.r(a * b) + acc)
        return acc

    def exp(self, x: fmpq) -> fmpq:
        with mpmath.workprec(200):
            value = mpmath.exp(mpmath.mpf(int(x.p)) / int(x.q))
            num, den = int(mpmath.floor(value * 2 ** 400)), 2 ** 400  # within 2^-400 relative
        return self.r(fmpq(int(num), den))


def _low_rank(m: LowRank, ar: Arithmetic, x: list[fmpq]) -> list[fmpq]:
    """scale·x + Σ u (v·x), the low-rank form, with rounded parameters."""
    scale = ar.r(m.scale)
    coeffs = [ar.dot([(ar.r(vj), xj) for vj, xj in zip(v, x)]) for _, v in m.terms]
    return [ar.dot([(scale, x[j])] + [(ar.r(u[j]), c) for (u, _), c in zip(m.terms, coeffs)]) for j in range(len(x))]


def forward(model: Model, sequences, fmt: str, order: str, seed: int = 0) -> list[list[list[fmpq]]]:
    ar = Arithmetic(fmt, order, seed)
    one = fmpq(1)
    seqs = [[[ar.r(v) for v in x] for x in seq] for seq in sequences]
    tau = ar.r(model.temperature) if model.temperature is not None else None
    for block in model.blocks:
        ff, sa = block.ff, block.sa
        eta, U, b = ar.r(ff.eta), [[ar.r(v) for v in row] for row in ff.U], [ar.r(v) for v in ff.b]
        W = [[ar.r(v) for v in row] for row in ff.W]
        new = []
        for seq in seqs:
            out = []
            for x in seq:
                h = [max(ar.dot(list(zip(row, x)) + [(bk, one)]), fmpq(0)) for row, bk in zip(U, b)]
                out.append([ar.dot([(eta, x[i])] + list(zip(W[i], h))) for i in range(len(x))])
            new.append(out)
        seqs = new
        if sa.rho == 1 and sa.V.scale == 0 and not any(any(u) and any(v) for u, v in sa.V.terms):
            continue
        rho = ar.r(sa.rho)
        new = []
        for seq in seqs:
            out = []
            for x in seq:
                ax = _low_rank(sa.A, ar, x)
                s = [ar.dot(list(zip(ax, y))) for y in seq]
                if model.attention == "hardmax":
                    top = [l for l, v in enumerate(s) if v == max(s)]
                    k = ar.r(fmpq(1, len(top)))
                    m = [ar.dot([(k, seq[l][j]) for l in top]) if len(top) > 1 else seq[top[0]][j]
                         for j in range(len(x))]
                else:
                    z = [ar.r(v / tau) for v in s]
                    e = [ar.exp(ar.r(v - max(z))) for v in z]
                    total = ar.dot([(v, one) for v in e])
                    p = [ar.r(v / total) for v in e]
                    m = [ar.dot([(pl, y[j]) for pl, y in zip(p, seq)]) for j in range(len(x))]
                vm = _low_rank(sa.V, ar, m)
                out.append([ar.dot([(rho, x[j]), (one, vm[j])]) for j in range(len(x))])
            new.append(out)
        seqs = new
    return seqs


def deviation(model: Model, sequences, exact, fmt: str, order: str, seed: int = 0) -> fmpq:
    """max |float − exact| over every coordinate of every final token."""
    got = forward(model, sequences, fmt, order, seed)
    return max((abs(g - w) for gs, ws in zip(got, exact) for gt, wt in zip(gs, ws) for g, w in zip(gt, wt)),
               default=fmpq(0))
