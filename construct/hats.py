"""Feed-forward "hats": x ↦ x + δ·h(w·x), h zero outside a window around p.

* ``flat = 0``: h(t) = (σ(t−p+ε) − 2σ(t−p) + σ(t−p−ε))/ε, three units, 1 at p.
* ``flat > 0``: a trapezoid, four units with breakpoints p−f−ε, p−f, p+f,
  p+f+ε: h = 1 on the whole plateau [p−f, p+f]. A float run whose projection
  errs by less than f still moves the token by exactly δ's float — the
  plateau absorbs the error instead of the slope 1/ε amplifying it.

Several hats with disjoint windows can share one FF layer."""
from __future__ import annotations

import random
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass

import numpy as np

from flint import fmpq
from sortedcontainers import SortedList

from tfcert.verify.formats import FF, SA, Block, LowRank
from tfcert.verify.numbers import ONE, ZERO, Vec, dot, scale
from tfcert.verify.shortcuts import float_key


@dataclass(frozen=True)
class Hat:
    """Move every token whose projection on ``w`` is ``p`` by ``delta``."""
    w: Vec
    p: fmpq
    eps: fmpq
    delta: Vec
    moves: tuple[tuple[int, int], ...]  # [sequence file index, token index]
    to: Vec
    flat: fmpq = ZERO
    above: Vec | None = None  # flat hats only: every token past the window moves by this, not by 0

    @property
    def window(self) -> tuple[fmpq, fmpq]:
        return self.p - self.flat - self.eps, self.p + self.flat + self.eps

    def units(self) -> tuple[tuple[fmpq, fmpq], ...]:
        """(breakpoint, weight) of each unit; h = Σ weight·σ(t − breakpoint)/ε."""
        p, f, e = self.p, self.flat, self.eps
        if f == 0:
            return (p - e, ONE), (p, fmpq(-2)), (p + e, ONE)
        return (p - f - e, ONE), (p - f, -ONE), (p + f, -ONE), (p + f + e, ONE)

    def columns(self) -> tuple[Vec, ...]:
        """Each unit's W column: δ·h(t), plus, with ``above``, a ramp from 0
        to ``above`` on the last unit pair (p+f … p+f+ε), so a token past the
        window moves by ``above``: its four units are on, their slopes still
        cancel, and the leader phase uses it to send such a token below every
        later window at once instead of letting every later hat cancel on it."""
        cols = [scale(weight / self.eps, self.delta) for _, weight in self.units()]
        if self.above is not None:
            ramp = scale(1 / self.eps, self.above)
            cols[-2], cols[-1] = tuple(c + r for c, r in zip(cols[-2], ramp)), tuple(c - r for c, r in zip(cols[-1], ramp))
        return tuple(cols)

    @property
    def gain(self) -> fmpq:
        """The power of two g the stored units are scaled by: U row g·w, bias −g·breakpoint,
        W column col/g — the same map (relu is positively homogeneous), and in floats the same
        products, but with the largest U or bias entry and the largest W entry balanced (within a
        factor 4): a hat's slopes δ/ε no longer have to fit a narrow format's range alone."""
        inner = max(*map(abs, self.w), *(abs(p) for p, _ in self.units()))
        return balance(inner, max(abs(v) for col in self.columns() for v in col))


def balance(inner: fmpq, outer: fmpq) -> fmpq:
    """The power of two g with g²·inner ≤ outer < 4·g²·inner (1 when either is 0): g·inner and
    outer/g are then within a factor 4 of each other, their geometric mean between them."""
    g = ONE
    if not inner or not outer:
        return g
    while 4 * g * g * inner <= outer:
        g *= 2
    while g * g * inner > outer:
        g /= 2
    return g


def hat_ff(hats: list[Hat], d: int) -> FF:
    """One FF layer (η = 1) holding ``hats`` side by side, each scaled by its gain."""
    U, b, cols = [], [], []
    for hat in hats:
        g = hat.gain
        for (breakpoint, _), col in zip(hat.units(), hat.columns()):
            U.append(scale(g, hat.w))
            b.append(-g * breakpoint)
            cols.append(scale(1 / g, col))
    W = tuple(tuple(col[i] for col in cols) for i in range(d))
    return FF(ONE, tuple(U), tuple(b), W)


def identity_sa() -> SA:
    return SA(ONE, LowRank(ZERO), LowRank(ZERO))


def hat_claims(hats: list[Hat], block: int, margins: list[fmpq | None]) -> list[dict]:
    """The certificate's claim for each hat of one FF layer (``margins`` on w): window and
    margin on the stored U row, g·w."""
    claims, first = [], 0
    for h, m in zip(hats, margins):
        n, g = len(h.units()), h.gain
        claims.append({"kind": "hat", "block": block, "units": list(range(first, first + n)),
                       "window": [str(g * h.window[0]), str(g * h.window[1])],
                       "moves": [list(m) for m in h.moves], "to": [str(v) for v in h.to],
                       "margin": None if m is None else str(g * m)})
        if h.above is not None:
            claims[-1]["above"] = [str(v) for v in h.above]
        first += n
    return claims


def margin(sorted_keys: list[fmpq], window: tuple[fmpq, fmpq]) -> fmpq | None:
    """Distance from the window to the nearest projection outside it."""
    lo, hi = window
    start, stop = bisect_right(sorted_keys, lo), bisect_left(sorted_keys, hi)
    outside = ([lo - sorted_keys[start - 1]] if start > 0 else []) + (
        [sorted_keys[stop] - hi] if stop < len(sorted_keys) else [])
    return min(outside) if outside else None


class Projections:
    """Every token's projection on the hats' common direction, and the sorted
    list of them, kept up to date as tokens move (to state margins)."""

    def __init__(self, values: dict[tuple[int, int], fmpq]):
        self.value = dict(values)
        self.keys = ordered(self.value.values())
        self.order = SortedList((v, ref) for ref, v in self.value.items())

    def move(self, ref: tuple[int, int], new: fmpq) -> None:
        del self.keys[bisect_left(self.keys, self.value[ref])]
        insort(self.keys, new)
        self.order.remove((self.value[ref], ref))
        self.order.add((new, ref))
        self.value[ref] = new

    def at_least(self, bound: fmpq) -> list[tuple[int, int]]:
        """The tokens whose projection is ≥ bound."""
        return [ref for _, ref in self.order.irange((bound,), None)]


def hat_blocks(layers: list[list[Hat]], d: int, first_block: int,
               index: Projections, closing: SA | None = None) -> tuple[list[Block], list[dict]]:
    """One FF layer per group of hats, stating each hat's margin from the
    projections before its layer. Every block's attention is the identity
    but the last one's, which is ``closing`` when given (the leader phase's:
    the collapse)."""
    blocks, claims = [], []
    for n, group in enumerate(layers):
        claims += hat_claims(group, first_block + len(blocks), [margin(index.keys, h.window) for h in group])
        sa = closing if closing is not None and n == len(layers) - 1 else identity_sa()
        blocks.append(Block(hat_ff(group, d), sa))
        for h in group:
            if h.above is not None:
                for ref in index.at_least(h.window[1]):
                    index.move(ref, index.value[ref] + dot(h.w, h.above))
            for ref in h.moves:
                index.move(ref, dot(h.w, h.to))
    return blocks, claims


def direction(values: list[Vec], d: int) -> Vec:
    """A direction on which the given distinct points have pairwise distinct
    projections, chosen among fixed pseudo-random candidates (deterministic)
    for the largest least gap relative to the spread: a float run then has
    the most room between tokens. Entries are multiples of 2^-20 in [-1, 1]
    (exact in binary32). Candidates are ranked in float64 (cheap; a wrong rank
    only costs conditioning) and checked exactly (sorted, not hashed: rational
    hashing is slow). Coarse grids can collide on many small-integer tokens,
    so if none separates, finer candidates (2^-40) follow."""
    rng = random.Random(SEED)
    coarse = _dense(rng, d)
    scores = _spread_scores(values, coarse, d)
    ranked = [w for score, w in sorted(zip(scores, coarse), key=lambda pair: pair[0], reverse=True) if score >= 0]
    for w in ranked + [_candidate(rng, d, 2 ** 40) for _ in range(1000)]:
        keys = ordered(dot(w, x) for x in values)
        if any(w) and all(a != b for a, b in zip(keys, keys[1:])):
            return w
    raise RuntimeError("no separating direction found")  # measure-zero failure: a bug


def _candidate(rng: random.Random, d: int, grid: int) -> Vec:
    return tuple(fmpq(rng.randint(-grid, grid), grid) for _ in range(d))


CANDIDATES, SEED = 48, 12345


def _dense(rng: random.Random, d: int) -> list[Vec]:
    return [_candidate(rng, d, 2 ** 20) for _ in range(CANDIDATES)]


def dense(d: int) -> list[Vec]:
    """The CANDIDATES dense directions direction() ranks first."""
    return _dense(random.Random(SEED), d)


SPARSE = 16  # sparse candidates per support size


def sparse(d: int) -> list[Vec]:
    """Directions with few non-zero entries (multiples of 2^-20 in [-1, 1], none 0): the
    coordinate axes, then SPARSE random ones with 2, 4, 8, … non-zero entries (below d).
    A float run's k-term dot product errs by γ_k times the sum of its terms' magnitudes, so
    where a few coordinates already tell the tokens apart, such a direction projects them
    more accurately than a dense one (γ_d)."""
    rng = random.Random(54321)
    out = [tuple(ONE if i == j else ZERO for i in range(d)) for j in range(d)]
    k = 2
    while k < d:
        for _ in range(SPARSE):
            support = set(rng.sample(range(d), k))
            out.append(tuple(fmpq(rng.choice((-1, 1)) * rng.randint(1, 2 ** 20), 2 ** 20) if i in support else ZERO
                             for i in range(d)))
        k *= 2
    return out


INTEGRAL = 64  # small-integer candidates


def integral(d: int) -> list[Vec]:
    """Directions with one to four small integer entries (±1 … ±7, or a power of two up to 64):
    on tokens with few significant bits each term w_k·x_k and their sum have few bits too, so a
    float run, even in binary16 or bfloat16, computes the projection exactly (verify/floats.py,
    exact_sum), where a dense direction's 21-bit entries round every product."""
    rng = random.Random(97531)
    out = []
    for _ in range(INTEGRAL):
        support = rng.sample(range(d), min(d, rng.choice((1, 2, 2, 3, 3, 4))))
        powers = rng.random() < 0.5
        out.append(tuple(fmpq(rng.choice((-1, 1)) * (2 ** rng.randint(0, 6) if powers else rng.randint(1, 7)))
                         if i in support else ZERO for i in range(d)))
    return list(dict.fromkeys(out))


def _spread_scores(values: list[Vec], candidates: list[Vec], d: int) -> list[float]:
    """Per candidate: least gap / spread of the projections, in float64 (0
    where the floats cannot tell, e.g. coordinates beyond float64's range;
    −1 where two projections coincide in float64: even if they differ
    exactly, a float run cannot tell those tokens apart, so the candidate is
    not worth its exact check — on many small-integer tokens every coarse
    candidate is such)."""
    try:
        X = np.array([[float(v) for v in x] for x in values], dtype=np.float64).reshape(len(values), d)
    except OverflowError:  # coordinates beyond float64: no ranking
        return [0.0] * len(candidates)
    with np.errstate(all="ignore"):
        W = np.array([[float(v) for v in w] for w in candidates], dtype=np.float64)
        P = np.sort(X @ W.T, axis=0)
        spread = P[-1] - P[0]
        least = np.diff(P, axis=0).min(axis=0) if len(values) > 1 else np.ones(len(candidates))
        score = np.where(np.isfinite(least / spread), least / spread, 0.0)
        score = np.where((least == 0) & (spread > 0) & np.isfinite(spread), -1.0, score)
    return [float(x) for x in score]


SIGNIFICANT_BITS = (8, 11, 24)  # bfloat16's, binary16's and binary32's significands
LEAST_SPACING = fmpq(1, 2 ** 24)  # binary16's subnormal spacing
HALF_TOKENS = 64  # a dataset of at most this many tokens gets flat hats for the half formats (flat_hat's ``half``)


def exact_grid(largest: fmpq, finest: fmpq, coarsest: fmpq, formats: tuple[int, ...]) -> fmpq | None:
    """The least finest·2^k, at most ``coarsest``, whose multiples below ``largest``
    have at most 8 significant bits, else 11, else 24 (``formats``: breakpoints on it
    are exact in bfloat16, binary16 or binary32, the narrowest format the room allows),
    or None where even ``coarsest`` is too fine for the last."""
    for bits in formats:
        step = finest
        while largest >= 2 ** bits * step and step <= coarsest:
            step *= 2
        if step <= coarsest:
            return step
    return None


def dyadic_near(x: fmpq, step: fmpq) -> fmpq:
    """The multiple of ``step`` (a power of two) nearest below-or-at x: a
    breakpoint with few significant bits is exact in a float format, so its
    rounding does not shift a window that the slopes then amplify."""
    return fmpq(int((x / step).floor())) * step


def flat_hat(g: Vec, source: Vec, gap: fmpq, delta: Vec, moves: tuple[tuple[int, int], ...], to: Vec,
             above: Vec | None = None, half: bool = False) -> Hat:
    """A flat-topped hat on the coordinate axis ``g`` (each pre-activation one coordinate minus a
    breakpoint: exact in floats) moving ``source``, whose value there is ``gap`` (≤ 1) from every
    other token's, by ``delta``. ε is the largest power of two ≤ min(1/16, gap/16); the plateau
    is the widest that keeps half the gap to each neighbour, so it absorbs a float run's error in
    the coordinate; the centre lies on a grid coarsened (from ε/8 up to gap/8, ε
    growing with it past ε, the plateau keeping clear of it) until every breakpoint has 24
    significant bits (exact_grid): exact in binary32, so no rounding of a breakpoint shifts the
    plateau by a fraction of ε that the slopes 1/ε then amplify (where binary32's spacing at the
    value exceeds ε, many tokens close together in t, the breakpoints take that spacing).
    ``half`` (a dataset of at most HALF_TOKENS tokens, where a half-precision claim is within
    reach): 8 significant bits where the gap leaves room, else 11, else binary16's own spacing
    (spaced_hat), else 24 — exact in bfloat16 or binary16 too, and a pre-activation of a value
    with few bits then exact in it (survey seeds 85, 103, 139 got binary16 claims so); on larger
    datasets the coarser grid cost binary32 claims of 0 (seeds 93, 120, 135, 165)."""
    eps = power_below(min(fmpq(1, 16), gap / 16))
    value = dot(g, source)
    step = exact_grid(abs(value) + gap, eps / 8, gap / 8, SIGNIFICANT_BITS[:2]) if half else None
    if half and step is None and (spaced := spaced_hat(g, value, gap, eps / 8, delta, moves, to, above)) is not None:
        return spaced
    step = step or exact_grid(abs(value) + gap, eps / 8, gap / 8, SIGNIFICANT_BITS[2:]) or eps / 8
    eps = max(eps, step)  # a grid coarser than ε (few bits, or binary32's spacing at the value): ε grows to it
    flat = fmpq(int(((gap / 2 - eps - max(step, eps / 8)) / eps).floor())) * eps
    return Hat(g, dyadic_near(value, step), eps, delta, moves, to, flat=flat, above=above)


def spaced_hat(g: Vec, value: fmpq, gap: fmpq, finest: fmpq, delta: Vec, moves: tuple[tuple[int, int], ...],
               to: Vec, above: Vec | None) -> Hat | None:
    """flat_hat's hat for a half format where the gap is narrower than eight of binary16's
    spacings s at the value, so that no 11-bit grid fits within gap/8: ε = s and every breakpoint
    a multiple of s (11 bits: binary16 rounds none), the centre the multiple nearest the value,
    the plateau the widest multiple of s within half the gap less s/2 — about the midpoint
    between covering the value's error and clearing the neighbours' — and the window at least s
    short of them. None where the gap is below three spacings, or that leaves no plateau of s, or
    s is finer than binary16's subnormal spacing.
    Before it such a hat took 24-bit breakpoints, which binary16 rounds: survey seeds 87 and 156
    (31 and 25 tokens, gaps of 4 to 6 spacings) got binary16 claims with it."""
    s = exact_grid(abs(value) + gap, finest, gap / 3, SIGNIFICANT_BITS[1:2])
    if s is None or s < LEAST_SPACING:  # below binary16's normal range its spacing stops shrinking
        return None
    p = fmpq(int((value / s + fmpq(1, 2)).floor())) * s
    flat = fmpq(int(((gap / 2 - s / 2) / s).floor())) * s
    if flat < s or flat + s + abs(p - value) > gap - s:
        return None
    return Hat(g, p, s, delta, moves, to, flat=flat, above=above)


def tent_hat(g: Vec, source: Vec, gap: fmpq, delta: Vec, moves: tuple[tuple[int, int], ...], to: Vec,
             above: Vec | None = None) -> Hat:
    """A three-unit hat on the coordinate axis ``g`` peaked at ``source``'s value there, for a
    value that every float run computes exactly (separation's ``exact``): the peak unit's
    pre-activation is then exactly 0 and only the first unit is on, so the move is one product
    and no plateau has to absorb an error — and ε, the largest power of two ≤ gap, gives
    slopes δ/ε sixteen times gentler than a flat hat's (ε ≤ gap/16) on the tokens it drops. A
    neighbour at distance gap = ε lies on the foot, where every unit is exactly 0 (its value is
    exact too), and the breakpoints p ± ε have no more bits than the values (ε = gap/2 would
    add one: a bias binary16 cannot hold)."""
    return Hat(g, dot(g, source), power_below(gap), delta, moves, to, above=above)


def power_below(x: fmpq) -> fmpq:
    """The largest power of two ≤ x (x > 0)."""
    p = ONE
    while p > x:
        p /= 2
    while 2 * p <= x:
        p *= 2
    return p


def ordered(values) -> list[fmpq]:
    """sorted(values), each compared as its nearest float first and exactly only where two
    floats tie (float_key rounds correctly, so the order is sorted's): an fmpq comparison is slow."""
    return sorted(values, key=lambda v: (float_key(v), v))


def min_gap(sorted_values: list[fmpq]) -> fmpq | None:
    gaps = [b - a for a, b in zip(sorted_values, sorted_values[1:])]
    return min(gaps) if gaps else None
