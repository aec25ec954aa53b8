"""Layer formulas: the one way tfcert evaluates a layer, in exact rationals
(and, for softmax enclosures, in arb balls with outward rounding).

Everything here is the definition of a layer, written as the formula reads:
FF η x + W σ(U x + b), the scores ⟨A x_i, x_l⟩, hardmax as the mean of the
argmax set, softmax enclosures. What to evaluate — which tokens, which
scores — is decided in shortcuts.py, never how.
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import arb, ctx, fmpq

from tfcert.verify.enclose import (PREC, Noise, Path, Token, as_balls, bounds, box, is_point, noise, noise_bound,
                                   path, rank_one, softmax_ball)
from tfcert.verify.formats import FF, SA, LowRank
from tfcert.verify.numbers import ZERO, Vec, add, dot, key, scale, sub, zero



def relu(x: fmpq) -> fmpq:
    return x if x > 0 else ZERO


def apply_ff(ff: FF, x: Vec) -> Vec:
    """η x + W σ(U x + b), exactly, over the non-zero entries of U and W."""
    U, W = ff.sparse
    hidden = [relu(sparse_dot(row, x) + bias) for row, bias in zip(U, ff.b)]
    kept = scale(ff.eta, x)
    return tuple(k + sparse_dot(w_row, hidden) if w_row else k for k, w_row in zip(kept, W))


def sparse_dot(row: tuple[tuple[int, fmpq], ...], x) -> fmpq:
    total = ZERO
    for j, v in row:
        total += v * x[j]
    return total


def apply_low_rank(m: LowRank, x: Vec) -> Vec:
    """(scale·I + Σ u vᵀ) x without forming the matrix."""
    out = scale(m.scale, x)
    for u, v in m.terms:
        out = add(out, scale(dot(v, x), u))
    return out


def is_zero_matrix(m: LowRank, d: int) -> bool:
    """Whether scale·I + Σ u vᵀ is the zero matrix (checked entry by entry)."""
    if not m.terms:
        return m.scale == 0
    return all(sum((u[i] * v[k] for u, v in m.terms), m.scale if i == k else ZERO) == 0
               for i in range(d) for k in range(d))


@dataclass(frozen=True)
class Attention:
    """Hardmax attention of one token: the argmax set and the gap to the
    best score outside it (None when every score ties)."""
    argmax: tuple[int, ...]
    gap: fmpq | None


class Scores:
    """The scores ⟨A x_i, x_l⟩ of one sequence. With A = scale·I + Σ u_k v_kᵀ,
    ⟨A x_i, x_l⟩ = scale·⟨x_i, x_l⟩ + Σ_k (v_k·x_i)(u_k·x_l): each token's r
    query and key projections are computed once, so a score costs r
    products instead of d² (exactly the same rational)."""

    def __init__(self, A: LowRank, X: list[Vec]):
        self.A, self.X = A, X
        self.queries = [tuple(dot(v, x) for _, v in A.terms) for x in X]
        self.keys = [tuple(dot(u, x) for u, _ in A.terms) for x in X]

    def row(self, i: int, at: list[int] | None = None) -> list[fmpq]:
        """Row i's scores, at the tokens ``at`` (default: every token)."""
        q, scale, xi = self.queries[i], self.A.scale, self.X[i]
        out = []
        for l in range(len(self.X)) if at is None else at:
            x, k = self.X[l], self.keys[l]
            total = scale * dot(xi, x) if scale != 0 else ZERO
            for a, b in zip(q, k):
                total += a * b
            out.append(total)
        return out

    def query(self, i: int) -> tuple:
        """What row i is a function of: tokens with equal queries have equal rows."""
        return key(self.queries[i]) if self.A.scale == 0 else key(self.X[i])

    def columns(self, values: list[fmpq] | None = None) -> list[tuple[int, ...]]:
        """The tokens grouped by their column of scores (and their ``values``),
        in order of first occurrence: one score, or one value, stands for a
        group's tokens in every row (a collapse's non-leaders are one group)."""
        groups: dict[tuple, list[int]] = {}
        for l in range(len(self.X)):
            name = key(self.keys[l]) if self.A.scale == 0 else key(self.X[l])
            groups.setdefault(name if values is None else (name, values[l].p, values[l].q), []).append(l)
        return [tuple(g) for g in groups.values()]


def attention_of(s: list[fmpq], groups: list[tuple[int, ...]] | None = None) -> Attention:
    """Hardmax attention from the scores ``s``, one per token or, with
    ``groups`` (Scores.columns), one per group of tokens."""
    best = max(s)
    top = [c for c, v in enumerate(s) if v == best]
    argmax = tuple(top) if groups is None else tuple(sorted(l for c in top for l in groups[c]))
    rest = [v for v in s if v != best]
    return Attention(argmax, best - max(rest) if rest else None)


def mean(X: list[Vec], idx: tuple[int, ...] | range) -> Vec:
    if len(idx) == 1:
        return X[idx[0]]
    total = zero(len(X[0]))
    for l in idx:
        total = add(total, X[l])
    return scale(fmpq(1, len(idx)), total)


def apply_sa_hardmax(sa: SA, X: list[Vec], attention: list[Attention]) -> list[Vec]:
    """ρ x_i + V · mean of the argmax set (taken once per distinct set)."""
    moved: dict[tuple[int, ...], Vec] = {}
    for att in attention:
        if att.argmax not in moved:
            moved[att.argmax] = apply_low_rank(sa.V, mean(X, att.argmax))
    if sa.rho == 0:  # 0·x + v = v: the tokens of one argmax set share its tuple
        return [moved[att.argmax] for att in attention]
    return [add(scale(sa.rho, x), moved[att.argmax]) for x, att in zip(X, attention)]


# ---------------------------------------------------------------- enclosures (softmax)

def apply_ff_token(ff: FF, x: Token) -> Token:
    """A feed-forward layer on a point (exact), a path (exact) or a box (arb)."""
    if is_point(x):
        return apply_ff(ff, x)
    if isinstance(x, Path):
        return ff_path(ff, x)
    with ctx.workprec(PREC):
        hidden = [(dot(row, x.balls) + bias).max(arb(0)) for row, bias in zip(ff.U, ff.b)]
        return box([ff.eta * xi + dot(w, hidden) for xi, w in zip(x.balls, ff.W)])


def ff_path(ff: FF, p: Path) -> Token:
    """The exact image of a path: between sign changes of the pre-activations
    the layer is affine, so the images of those points and the vertices suffice."""
    out = [apply_ff(ff, p.vertices[0])]
    for a, b in zip(p.vertices, p.vertices[1:]):
        delta = sub(b, a)
        cuts = set()
        for row, bias in zip(ff.U, ff.b):
            slope = dot(row, delta)
            if slope != 0:
                s = -(dot(row, a) + bias) / slope
                if 0 < s < 1:
                    cuts.add(s)
        out += [apply_ff(ff, add(a, scale(s, delta))) for s in sorted(cuts)]
        out.append(apply_ff(ff, b))
    return path(out)


def sa_boxes(sa: SA, X: list[Token], tau: fmpq, uniform: bool) -> list[Token]:
    """Softmax attention on boxes at temperature τ: the fallback enclosure."""
    balls = [as_balls(x) for x in X]
    d = len(balls[0])
    out = []
    with ctx.workprec(PREC):
        for x in balls:
            if uniform:
                weights = [arb(1)] * len(balls)
            else:
                ax = apply_low_rank(sa.A, x)
                s = [dot(ax, y) for y in balls]
                weights = [((v - s[0]) / tau).exp() for v in s]
            total = sum(weights, arb(0))
            m = tuple(sum((w * y[k] for w, y in zip(weights, balls)), arb(0)) / total for k in range(d))
            out.append(box(list(add(scale(sa.rho, x), apply_low_rank(sa.V, m)))))
    return out


def sa_rank_one(sa: SA, X: list[Vec], tau: fmpq, below: bool) -> tuple[list[Token], tuple, tuple]:
    """Softmax attention with V = u vᵀ on exact points: token i becomes the
    segment ρx_i + t·u, t ∈ [lo, hi]. ``below``: [lo, hi] is μ_S ± the noise
    bound at τ, which contains t at every temperature 0 < τ' ≤ τ; otherwise
    it is the arb enclosure of t at τ alone. Both are cut to the range of v·x."""
    u, v = rank_one(sa.V)
    values = [dot(v, x) for x in X]
    floor, ceil = min(values), max(values)
    out, seen = [], {}
    grouped, sizes, rows = scored(sa.A, X, values)
    for x, (att, nz, s) in zip(X, rows):
        if id(nz) not in seen:  # tokens of one query share their attention and noise: one enclosure
            if below:
                b = bounds(noise_bound(nz, tau))[1]
                seen[id(nz)] = nz.centre - b, nz.centre + b
            else:
                seen[id(nz)] = bounds(softmax_ball(s, grouped, tau, sizes))
        lo, hi = seen[id(nz)]
        base = scale(sa.rho, x)
        out.append(path([add(base, scale(max(lo, floor), u)), add(base, scale(min(hi, ceil), u))]))
    return out, tuple(att for att, _, _ in rows), tuple(nz for _, nz, _ in rows)


def scored(A: LowRank, X: list[Vec], values: list[fmpq]) -> tuple[list[fmpq], list[int], list[tuple]]:
    """Every token's (hardmax attention, noise, scores) for the values v·x,
    worked out once per distinct query on one score per group of tokens
    (Scores.columns), and the groups' values and sizes: the same attention,
    and the same sums of noise terms and of softmax weights, as token by token."""
    rows = Scores(A, X)
    groups = rows.columns(values)
    firsts, sizes = [g[0] for g in groups], [len(g) for g in groups]
    grouped = [values[l] for l in firsts]
    done: dict[tuple, tuple[Attention, Noise, list[fmpq]]] = {}
    for i in range(len(X)):
        if (q := rows.query(i)) not in done:
            s = rows.row(i, firsts)
            done[q] = attention_of(s, groups), noise(s, grouped, sizes), s
    return grouped, sizes, [done[rows.query(i)] for i in range(len(X))]
