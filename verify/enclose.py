"""Rigorous enclosures for softmax attention (docs/softmax.md).

exp only ever enters through python-flint ``arb`` balls, and every ball is
turned into exact rationals (its endpoints are dyadic) before anything is
compared. A token that softmax makes inexact is carried as one of:

* ``Path`` — a piecewise-affine path of exact rational vertices; the token
  is some point of it. A rank-1 attention output is a segment, and a
  feed-forward layer maps a path to a path *exactly* (split each edge where
  a unit's pre-activation changes sign, evaluate the vertices), so a snap
  layer can turn it back into a single exact point.
* ``Box`` — one arb ball per coordinate, the fallback for anything else;
  a box is exact only when every ball has radius 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from flint import arb, ctx, fmpq

from tfcert.verify.formats import LowRank
from tfcert.verify.numbers import Vec, dot

PREC = 128  # bits of every arb computation
MAX_VERTICES = 256  # a longer path is enclosed by its bounding box
LIMIT = 1 << 14  # bits: the range of the rationals an enclosure is turned into


@dataclass(frozen=True)
class Path:
    """The token is a point of the path through ``vertices`` (≥ 2, consecutive distinct)."""
    vertices: tuple[Vec, ...]


@dataclass(frozen=True)
class Box:
    """The token lies in the product of these balls."""
    balls: tuple[arb, ...]


Token = Union[Vec, Path, Box]


def is_point(x: Token) -> bool:
    return isinstance(x, tuple)


# ---------------------------------------------------------------- arb ↔ rationals

def dyadic(x: arb, up: bool) -> fmpq:
    """The value of an exact arb (a midpoint or a radius), rounded outward —
    up or down — to a multiple of 2^-LIMIT. arb exponents can be astronomically
    large (exp(-10^40) is fine as a ball), so an exact rational is only formed
    within ±LIMIT bits; a magnitude beyond 2^LIMIT is refused."""
    man, exp = (int(v) for v in x.man_exp())
    if exp + man.bit_length() > LIMIT:
        raise ArithmeticError(f"an enclosure endpoint exceeds 2^{LIMIT}")
    if exp >= 0:
        return fmpq(man << exp)
    if exp >= -LIMIT:
        return fmpq(man, 1 << -exp)
    shift = -LIMIT - exp  # man·2^exp = (man / 2^shift)·2^-LIMIT; >> floors
    return fmpq(-((-man) >> shift) if up else man >> shift, 1 << LIMIT)


def exact(x: arb) -> fmpq:
    """The exact value of an exact arb; ArithmeticError if it needs rounding."""
    value = dyadic(x, False)
    if value != dyadic(x, True):
        raise ArithmeticError("an exact ball below 2^-LIMIT")
    return value


def bounds(x: arb) -> tuple[fmpq, fmpq]:
    """Rationals lo ≤ every point of the ball ≤ hi."""
    if not x.is_finite():
        raise ArithmeticError("non-finite enclosure")
    mid, rad = x.mid(), x.rad()
    return dyadic(mid, False) - dyadic(rad, True), dyadic(mid, True) + dyadic(rad, True)


def ball(x: fmpq) -> arb:
    return arb(x)


# ---------------------------------------------------------------- tokens

def path(vertices: list[Vec]) -> Token:
    """A path with consecutive repeats removed; a single point when all coincide;
    past MAX_VERTICES its bounding box (it lies in the vertices' hull), since a path
    folded through feed-forward windows can gain vertices geometrically, layer by layer."""
    kept = [vertices[0]]
    for v in vertices[1:]:
        if v != kept[-1]:
            kept.append(v)
    if len(kept) <= MAX_VERTICES:
        return kept[0] if len(kept) == 1 else Path(tuple(kept))
    with ctx.workprec(PREC):
        return box(list(as_balls(Path(tuple(kept)))))


def box(balls: list[arb]) -> Token:
    """A box, or the exact point it is when every radius is 0."""
    if all(b.is_exact() for b in balls):
        try:
            return tuple(exact(b) for b in balls)
        except ArithmeticError:
            pass
    return Box(tuple(balls))


def as_balls(x: Token) -> tuple[arb, ...]:
    if isinstance(x, Box):
        return x.balls
    if isinstance(x, Path):
        out = []
        for i in range(len(x.vertices[0])):
            lo, hi = coordinate_range(x, i)
            out.append(ball(lo).union(ball(hi)))
        return tuple(out)
    return tuple(ball(v) for v in x)


def coordinate_range(x: Token, i: int) -> tuple[fmpq, fmpq]:
    """Exact [min, max] of coordinate ``i`` over the token's enclosure."""
    if isinstance(x, Box):
        return bounds(x.balls[i])
    points = x.vertices if isinstance(x, Path) else (x,)
    values = [p[i] for p in points]
    return min(values), max(values)


def axis_of(u: Vec) -> int | None:
    """k when u is the unit vector e_k (then u·x is coordinate k: no products)."""
    nonzero = [i for i, c in enumerate(u) if c != 0]
    return nonzero[0] if len(nonzero) == 1 and u[nonzero[0]] == 1 else None


def projection_range(x: Token, u: Vec, axis: int | None) -> tuple[fmpq, fmpq]:
    """Rationals bounding u·x over the token's enclosure (exact for points
    and paths: a path's extremes are at its vertices); ``axis`` = axis_of(u)."""
    if axis is not None:
        return coordinate_range(x, axis)
    if isinstance(x, Box):
        with ctx.workprec(PREC):
            return bounds(sum((c * b for c, b in zip(u, x.balls)), arb(0)))
    values = [dot(u, p) for p in (x.vertices if isinstance(x, Path) else (x,))]
    return min(values), max(values)


def width(x: Token) -> fmpq:
    """The largest coordinate width of the enclosure (0 for an exact point)."""
    if is_point(x):
        return fmpq(0)
    n = len(x.balls) if isinstance(x, Box) else len(x.vertices[0])
    return max(hi - lo for lo, hi in (coordinate_range(x, i) for i in range(n)))


# ---------------------------------------------------------------- softmax

@dataclass(frozen=True)
class Noise:
    """Token i's collapse noise |t − μ_S| ≤ Σ k·exp(−Δ_l/τ)·D_l: μ_S is the
    mean of v·x over the argmax set S, Δ_l > 0 the score gap of l ∉ S,
    D_l = |v·x_l − μ_S|/|S| (since Z ≥ |S|·exp(s_max/τ)) and k the number
    of tokens l that share this score and value."""
    centre: fmpq
    terms: tuple[tuple[fmpq, fmpq, int], ...]  # (Δ_l, D_l, k), D_l > 0


def noise(s: list[fmpq], values: list[fmpq], sizes: list[int]) -> Noise:
    """From one score and one value per group of ``sizes`` tokens."""
    best = max(s)
    top = [c for c, v in enumerate(s) if v == best]
    count = sum(sizes[c] for c in top)
    mu = sum((sizes[c] * values[c] for c in top), fmpq(0)) / count
    terms = tuple((best - s[c], abs(values[c] - mu) / count, sizes[c])
                  for c in range(len(s)) if s[c] != best and values[c] != mu)
    return Noise(mu, terms)


def noise_bound(n: Noise, tau: fmpq) -> arb:
    """Σ k·exp(−Δ/τ)·D, enclosed; every term increases with τ."""
    with ctx.workprec(PREC):
        total = arb(0)
        for gap, spread, k in n.terms:
            total += (-ball(gap / tau)).exp() * ball(k * spread)
        return total


def softmax_ball(s: list[fmpq], values: list, tau: fmpq, sizes: list[int]) -> arb:
    """Σ_l π_l·values_l with π = softmax(s/τ), enclosed (values exact or
    balls; ``sizes``: how many tokens each score and value stands for)."""
    best = max(s)
    with ctx.workprec(PREC):
        weights = [(ball((v - best) / tau)).exp() * k for v, k in zip(s, sizes)]
        total = arb(0)
        for w, x in zip(weights, values):
            total += w * x
        return total / sum(weights, arb(0))


def rank_one(V: LowRank) -> tuple[Vec, Vec] | None:
    """(u, v) when V = u vᵀ exactly as stored (scale 0, one term)."""
    return V.terms[0] if V.scale == 0 and len(V.terms) == 1 else None
