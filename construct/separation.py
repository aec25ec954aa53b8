"""Phase 1, separation: make every token of the whole dataset distinct.

The FF of the first block (η = 0) projects every token to (t, 1, 0, …),
t = α·w·x + β ∈ [1/64, 1/32], on a direction where distinct tokens project
apart; the SA of the phase's last block (A = 0) adds λ times the sequence's
mean t̄_j (λ = 0 where no token is shared). On a direction where distinct
means project apart too, shifted values t + λt̄_j collide only for finitely
many λ — unless two sequences share a token and have equal means.
Those are first told apart, between the projection and the mean shift, by
"bumps": a flat-topped hat on t alone (exact pre-activations in floats, a
plateau that absorbs the float error of t) moving one token value (in one
sequence, not the other) by a power of two δ, a quarter of its gap or less
(docs/construction.md, "Bumps").
Each bump splits a class of equal means without merging any two others, so
at most N − 1 are needed; with the projection they take B + 1 blocks, the
last one's SA the mean shift.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, combinations, count, islice

import numpy as np
from flint import fmpq

from tfcert.construct.hats import (HALF_TOKENS, Projections, dense, direction, flat_hat, hat_blocks, identity_sa, integral,
                                   min_gap, ordered, power_below, sparse)
from tfcert.construct.phase import Phase, frozen
from tfcert.verify.determined import RUN_TERMS
from tfcert.verify.floats import FORMATS, exact_sum, round_nearest, valuation
from tfcert.verify.layers import mean, sparse_dot
from tfcert.verify.shortcuts import distinct_sorted
from tfcert.verify.formats import FF, SA, Block, Dataset, LowRank, nonzero
from tfcert.verify.numbers import ONE, ZERO, Vec, dot, scale, unit


def small_rationals():
    """1, 1/2, 2, 1/3, 3, 2/3, 3/2, …: candidates with small denominators first."""
    for total in count(2):
        for q in range(1, total):
            p = total - q
            if fmpq(p, q).p == p:  # in lowest terms
                yield fmpq(p, q)


def sequence_means(seqs: list[list[Vec]]) -> list[Vec]:
    """Each sequence's exact mean: computed once per construction (0.14 s at N = 1000)."""
    return [mean(s, range(len(s))) for s in seqs]


def _clash(seqs: list[list[Vec]], keys: list) -> tuple[int, int] | None:
    """Two sequences with equal ``keys`` (their means) and a shared token, if any."""
    by_mean = defaultdict(list)
    for j, key in enumerate(keys):
        by_mean[key].append(j)
    for group in by_mean.values():
        for a, b in combinations(group, 2):
            if set(seqs[a]) & set(seqs[b]):
                return a, b
    return None


def bump_plan(seqs: list[list[Vec]], means: list[Vec]) -> list[Vec]:
    """The token values the bumps move, in order: while two sequences have
    equal means and share a token, a value in one but not the other (the
    first in file order). Moving value c_k by δ_k adds δ_k/n_j to the mean
    of every sequence j holding it, so which means are equal after the bumps
    does not depend on the projection or on the δ_k (for all but finitely
    many): a sequence's mean is kept as its mean and the coefficients of the
    δ_k, equal to another's only where both are. Each bump splits the class
    of the pair and merges none: at most N − 1. ``means``: the sequences' (sequence_means)."""
    keys = [(mu, ()) for mu in means]
    plan = []
    while (pair := _clash(seqs, keys)) is not None:
        a, b = pair
        only = [x for x in seqs[a] if x not in set(seqs[b])] or [x for x in seqs[b] if x not in set(seqs[a])]
        c = only[0]
        plan.append(c)
        keys = [(mu, coef + (fmpq(int(c in s), len(s)),)) for (mu, coef), s in zip(keys, seqs)]
    return plan


@dataclass(frozen=True)
class Bump:
    value: Vec  # the token value it moves (every copy)
    t: fmpq  # its t before the bump
    gap: fmpq  # the distance from t to the nearest other token's
    delta: fmpq  # the move in t: ± α's mantissa times a power of two, ≤ gap/4


def _bumped(ts: list[list[fmpq]], seqs: list[list[Vec]], means: list[Vec], plan: list[Vec],
            unit: fmpq) -> tuple[list[list[fmpq]], tuple[Bump, ...]] | None:
    """Every token's t after the plan's bumps, and the bumps. Each moves its
    value towards the wider side, by the largest ``unit`` (α's mantissa, m/8)
    times a power of two ≤ gap/4 (gap: the nearer neighbour's distance): the
    same multiple of α as with a power-of-two α, so the same values collide,
    in float64 and exactly. It stays 3/4 of the gap clear of
    every other token and its hat's slopes δ/ε stay below 8 (ε > gap/32,
    hats.flat_hat): the tokens past the hat's window, whose four units are
    on and cancel, keep their float error. δ is halved while two means of distinct classes (bump_plan)
    coincide; None where 64 halvings do not part them."""
    ts = [list(row) for row in ts]
    coefs, bumps = [() for _ in seqs], []
    for c in plan:
        where = [(j, i) for j, s in enumerate(seqs) for i, x in enumerate(s) if x == c]
        t = ts[where[0][0]][where[0][1]]
        below = [t - v for row in ts for v in row if v < t]
        above = [v - t for row in ts for v in row if v > t]
        gap = min(below + above)
        sign = ONE if not above or (below and min(above) >= min(below)) else -ONE
        delta = sign * unit * power_below(gap / (4 * unit))
        coefs = [coef + (fmpq(int(c in s), len(s)),) for coef, s in zip(coefs, seqs)]
        for _ in range(64):
            moved = [list(row) for row in ts]
            for j, i in where:
                moved[j][i] = t + delta
            if _classes_apart(moved, means, coefs):
                break
            delta /= 2
        else:
            return None
        ts = moved
        bumps.append(Bump(c, t, gap, delta))
    return ts, tuple(bumps)


def _classes_apart(ts: list[list[fmpq]], means: list[Vec], coefs: list[tuple]) -> bool:
    """Whether sequences in distinct classes (mean, bump coefficients) have distinct means of t."""
    by_class = {}
    for row, mu, coef in zip(ts, means, coefs):
        by_class.setdefault((mu, coef), sum(row, ZERO) / len(row))
    return _distinct(list(by_class.values()))


def separation(dataset: Dataset, attention: str, before: Phase, spaced: bool = False) -> tuple[Phase, Phase]:
    """The bump phase and the separation. The first FF (η = 0) maps every
    token to (t, 1, 0, …) with t = α·w·x + β ∈ [1/64, 1/32]: one scalar per
    token, on a direction w where distinct tokens project apart (the shifted
    values t + λ·t̄_j are checked themselves), and the constant 1 in coordinate 2 that the later
    phases use as an anchor. The bumps' hats follow (one per block, on t
    alone), then an SA (A = 0: the exact mean, for every τ too) adds λ·t̄_j
    (λ = 0 where no token is shared: V is then 0 and a float run's SA
    exact). After it every t is distinct. w, the bumps and λ are chosen
    together (_conditioned). Without bumps the separation is one block of
    its own; with B bumps the bump phase holds all B + 1 blocks and the
    separation speaks about the SA of the last one, as the collapse does of
    the leader phase's. ``before``: the compression, whose tokens it reads and after whose
    blocks its own come; ``spaced``: _ranking's level 2 (a hardmax mean shift of an exact t
    spaced for binary16) before the rest."""
    d, seqs, first = dataset.d, [list(s) for s in before.tokens], before.span[1]
    means = sequence_means(seqs)
    plan = bump_plan(seqs, means)
    w, (alpha, beta), lam, ts, bumps = _conditioned(seqs, means, [len(p.output) for p in dataset.pairs],
                                                    plan, d, attention == "softmax", spaced)
    e_t, e_y = unit(d, 0), unit(d, 1)
    ff = FF(ZERO, (scale(alpha, w), tuple(ZERO for _ in range(d))), (beta, ONE),
            tuple((a, b) for a, b in zip(e_t, e_y)))
    rest = tuple(ZERO for _ in range(d - 2))
    shifts = mean_shifts(ts, lam)
    sa = SA(ONE, LowRank(ZERO), LowRank(ZERO, ((scale(lam, e_t), e_t),)))
    after = [[(t + s, ONE) + rest for t in row] for row, s in zip(ts, shifts)]
    keys = ordered(t + s for row, s in zip(ts, shifts) for t in row)
    gap = min_gap(keys)
    block = first + len(bumps)
    claims = ({"kind": "uniform_attention", "block": block},
              {"kind": "separation", "block": block, "direction": [str(v) for v in e_t],
               "min_gap": None if gap is None else str(gap)})
    if not bumps:
        exact = lam == 0 and _exact_projection(ff.U[0], beta, [x for s in seqs for x in s])
        return (Phase("bump", (first, first), (), (), frozen(seqs)),
                Phase("separation", (first, first + 1), (Block(ff, sa),), claims, frozen(after), exact=exact))
    projected = {(p.index, i): alpha * dot(w, x) + beta for p, s in zip(dataset.pairs, seqs) for i, x in enumerate(s)}
    hats = [flat_hat(e_t, (b.t,) + (ONE,) + rest, min(b.gap, ONE), scale(b.delta, e_t),
                     tuple((p.index, i) for p, s in zip(dataset.pairs, seqs) for i, x in enumerate(s) if x == b.value),
                     (b.t + b.delta, ONE) + rest, half=sum(map(len, seqs)) <= HALF_TOKENS) for b in bumps]
    blocks, hat_claims = hat_blocks([[h] for h in hats], d, first + 1, Projections(projected), sa)
    bumped = [[(t, ONE) + rest for t in row] for row in ts]
    return (Phase("bump", (first, block + 1), (Block(ff, identity_sa()), *blocks), tuple(hat_claims), frozen(bumped)),
            Phase("separation", (block, block + 1), (), claims, frozen(after)))


SHIFTS = 32  # the mean shifts λ ranked at a time
CHUNKS = 8  # how many times: λ = 0 and the first SHIFTS small rationals, then the next SHIFTS, …


def shift_chunks():
    """The mean shifts _conditioned ranks, SHIFTS at a time (λ = 0 first): a later chunk only where
    no pair of an earlier one separates. Most datasets separate within the first; on many
    sequences of collinear tokens every λ of small denominator makes two shifted values meet
    (t + λ·t̄_j is the same scalar line for every direction): on 235 such integer tokens in 59
    sequences (float_survey.dataset(566)) no pair of the first chunk separated, construct fell
    back to an unranked dense direction, and binary32 had no claim, its float32 runs missing by
    far; ranked, an axis with λ = 9/7 gives binary32 claims of 0 (hardmax) and 1.2e-4 (softmax)."""
    rationals = small_rationals()
    yield [ZERO, *islice(rationals, SHIFTS)]
    for _ in range(CHUNKS - 1):
        yield list(islice(rationals, SHIFTS))


def ranked_shifts(seqs, leaders: list[int], plan: list[Vec], candidates: list[Vec], d: int, softmax: bool,
                  spaced: bool = False):
    """(λs, _ranking's keys) for each chunk of shift_chunks in turn, until float64 tells no
    candidate's tokens apart (_ranking's None): no later chunk is ranked then."""
    for lams in shift_chunks():
        if (keys := _ranking(seqs, leaders, plan, candidates, lams, d, softmax, spaced)) is None:
            return
        yield lams, keys


def mean_shifts(ts: list[list[fmpq]], lam: fmpq) -> list[fmpq]:
    """λ·t̄_j, what the separation's attention adds to each t of sequence j: once per sequence."""
    return [lam * sum(row, ZERO) / len(row) for row in ts]


def _scaling(projections: list[fmpq], power: bool = False) -> tuple[fmpq, fmpq]:
    """α and β with α·w·x + β ∈ [1/64, 1/32]: every later breakpoint lies
    within a factor 2 of every t, so the hats' pre-activations t − breakpoint
    are exact in floats (Sterbenz). α = 2^-k·m/8 (m = 8 … 15, α ≤ 1), the
    largest such with a spread of t ≤ 1/64: the gaps between tokens fill the
    range within 1/9 rather than within a factor 2 (a power of two alone),
    while their float error, about u·|t|, stays; and α·w stays exact in
    binary32 (w's entries multiples of 2^-20 in [−1, 1]: 21 bits, times m's 4). With ``power``
    (a small-integer direction, hats.integral) α is a power of two: α·w keeps w's few bits, so
    that a narrow format computes t exactly."""
    lo, hi = min(projections), max(projections)
    alpha = ONE
    while alpha * (hi - lo) > fmpq(1, 64):
        alpha /= 2
    if alpha < 1 and not power:
        alpha *= max(m for m in range(8, 16) if alpha * m * (hi - lo) <= fmpq(8, 64)) / fmpq(8)
    return alpha, fmpq(1, 64) - alpha * lo


def _exact_projection(row: Vec, beta: fmpq, tokens: list[Vec]) -> bool:
    """Whether a binary16 run (and so every wider one) computes t = row·x + β exactly for
    every token: the inputs the row weighs, the row and β numbers of the format and the sum exact by the
    exact evaluation lemma (verify/floats.py, exact_limit), each term on the side of its
    known sign (verify/determined.py, total)."""
    fmt = FORMATS["binary16"]
    try:
        if any(round_nearest(v, fmt) != v for v in (*row, beta)):
            return False
        for x in tokens:
            if any(round_nearest(v, fmt) != v for v, w in zip(x, row) if w) or exact_sum(
                    [_term(w * v) for w, v in zip(row, x)] + [_term(beta)], fmt) is None:
                return False
    except (OverflowError, ValueError):  # beyond the range, or not a dyadic
        return False
    return True


def _term(q: fmpq) -> tuple[int | None, fmpq, int]:
    """exact_sum's term for a number known exactly: exponent, magnitude and sign (as
    determined.total forms its products')."""
    return valuation(q), abs(q), (q > 0) - (q < 0)


def _candidates(tokens: list[Vec], d: int) -> list[Vec]:
    """The directions that _conditioned ranks."""
    return dense(d) + sparse(d) + integral(d) + _searched(tokens, d) + _fitted(tokens, d)


SEARCHED = 256  # small-integer candidates fitted to the data
INDEXED = 2 ** 10  # the most tokens a narrow format can index on one exact t (binary16: 11 bits)


def _searched(tokens: list[Vec], d: int) -> list[Vec]:
    """Small-integer directions scaled to the data, for datasets that a narrow format could
    index (at most 2^10 tokens): entries up to 2^9 / (k·max|x|) on k random coordinates whose
    every value is a dyadic (k = 2 … 6), so that every projection stays within ±2^9 and, with few
    significant bits in the tokens, a binary16 run computes t exactly (_exactness) — where
    integral()'s fixed entries either collide on many small-integer tokens or exceed that range."""
    dyadic = [c for c, g in enumerate(_grains(tokens, d)) if g is not None]  # the coordinates no run rounds
    if len(tokens) > INDEXED or len(dyadic) < 2:
        return []
    top = max((abs(x[c]) for x in tokens for c in dyadic), default=ONE) or ONE
    rng = np.random.default_rng(2468)
    out = []
    for _ in range(SEARCHED):
        k = int(rng.integers(2, min(len(dyadic), 6) + 1))
        bound = min(max(1, int((fmpq(2 ** 9) / (k * top)).floor())), 2 ** 20)  # tiny coordinates: no more bits
        support = rng.choice(len(dyadic), size=k, replace=False)
        w = [ZERO] * d
        for i in support:
            w[dyadic[int(i)]] = fmpq(int(rng.integers(1, bound + 1)) * int(rng.choice((-1, 1))))
        out.append(tuple(w))
    return list(dict.fromkeys(out))


FITTED = 64  # the most distinct tokens _fitted searches a bfloat16-exact direction for
STEPS = 1500  # the first walk's moves: a bounded cost (about 0.3 s where it finds nothing), deterministic
PAIRS, SHORT = 400, 10  # then as many short walks, from the best pairs of coordinates (_pairs)


def _fitted(tokens: list[Vec], d: int) -> list[Vec]:
    """A small-integer direction on which every distinct token projects apart and a bfloat16 run
    computes every t exactly (_exactness's level 0), found by local search (_walk): _searched's
    random draws rarely put a few dozen tokens apart into the at most 128 values of t that 8
    significant bits allow (survey seed 136: 26 tokens in d = 64, none of its 256). The first walk
    starts from the axis the tokens spread most on and takes up to STEPS moves; where it finds
    nothing, up to PAIRS walks of SHORT moves start from pairs of coordinates that alone tell the
    most tokens apart (_pairs): many short walks from good starts found what one long walk did
    not (survey seeds 5 and 80: 49 and 45 integer tokens, found after about 20 000 and 90 000
    moves from the axis, here within 400 × 10). The walks search the coordinates whose every value
    is a dyadic. Empty where there are none, more than FITTED tokens, or where nothing is found."""
    points = distinct_sorted(tokens)
    return list(_search(tuple(points), d)) if len(points) <= FITTED and d >= 2 else []


@lru_cache(maxsize=16)  # a softmax build constructs up to four times (τ* lowered): one search
def _search(points: tuple[Vec, ...], d: int) -> tuple[Vec, ...]:
    """_fitted's walks on the distinct tokens."""
    grains = _grains(points, d)
    dyadic = [c for c, g in enumerate(grains) if g is not None]  # the coordinates no run rounds: w's support
    grain = _grain(grains, dyadic)
    if not dyadic or grain[1] > NARROW[0] \
            or len({tuple(x[c] for c in dyadic) for x in points}) < len(points):  # equal on every dyadic coordinate
        return ()
    try:
        X = np.array([[float(x[c]) for c in dyadic] for x in points], dtype=np.float64)
        grid = np.array([[int(x[c] * fmpq(2) ** -grain[0]) for c in dyadic] for x in points], dtype=np.int64)  # X on
        # its grid
    except OverflowError:  # beyond float64 or int64: no bfloat16 number either
        return ()
    axis = np.zeros(len(dyadic), dtype=np.int64)
    axis[int(np.argmax(X.max(axis=0) - X.min(axis=0)))] = 1
    rng = np.random.default_rng(1357)
    walks = chain([(axis, STEPS)], ((w, SHORT) for w in _pairs(X, grid, grain[0])))
    for start, steps in walks:
        if (w := _walk(start, steps, X, grid, grain[0], rng)) is not None:
            on = dict(zip(dyadic, w.tolist()))
            return (tuple(fmpq(on.get(c, 0)) for c in range(d)),)
    return ()


def _walk(w: np.ndarray, steps: int, X: np.ndarray, grid: np.ndarray, least: int,
          rng: np.random.Generator) -> np.ndarray | None:
    """A tabu search from w: each step moves one entry by ±1, the move, among all 2d, that leaves
    the fewest collisions and the least excess over the exact evaluation lemma's range (_cost),
    but not the undoing of a move of the last d/2 steps. The w reached with no collision within
    the range, or None after ``steps`` moves."""
    d = X.shape[1]
    w = w.copy()
    # kept as w moves: the projections, on the grid and in floats, and each token's positive and
    # negative terms' sums
    terms = X * w
    G, P = grid @ w, X @ w
    pos, neg = np.maximum(terms, 0).sum(axis=1), np.maximum(-terms, 0).sum(axis=1)
    ks, ms = np.r_[0, np.repeat(np.arange(d), 2)], np.r_[0, np.tile([-1, 1], d)]  # the moves: entry ks[j] by
    # ms[j], the first no move (w as it is)
    tabu = np.zeros(2 * d + 1, dtype=np.int64)
    for step in range(steps):
        Gm, Pm = G[:, None] + grid[:, ks] * ms, P[:, None] + X[:, ks] * ms
        before, after = X[:, ks] * w[ks], X[:, ks] * (w[ks] + ms)
        posm = pos[:, None] + np.maximum(after, 0) - np.maximum(before, 0)
        negm = neg[:, None] + np.maximum(-after, 0) - np.maximum(-before, 0)
        low = _trailing(w, ks, ms)
        cost = np.where(low < 0, np.inf, _cost(Gm, Pm, posm, negm, least + np.where(low < 0, 0, low)))
        if (cost == 0).any():
            j = int(np.flatnonzero(cost == 0)[0])
            w[ks[j]] += ms[j]
            return w
        allowed = np.where(tabu <= step, cost, np.inf)
        allowed[0] = np.inf  # a step moves
        j = int(rng.choice(np.flatnonzero(allowed == allowed.min())))
        w[ks[j]] += ms[j]
        G, P, pos, neg = Gm[:, j], Pm[:, j], posm[:, j], negm[:, j]
        tabu[j + 1 if j % 2 else j - 1] = step + max(3, d // 2)  # the move that undoes it
    return None


def _cost(G: np.ndarray, P: np.ndarray, pos: np.ndarray, neg: np.ndarray, exponent) -> np.ndarray:
    """Per column (a candidate w): the tokens' collisions on the grid, plus half a collision per
    value of t beyond the exact evaluation lemma's range in bfloat16 (_over). ``G``, ``P``: per
    token w·x on the grid and in floats; ``pos``, ``neg``: its positive and negative terms' sums;
    ``exponent``: the least bits of the weighed coordinates and of w."""
    spread = P.max(axis=0) - P.min(axis=0)
    alpha = _powers(spread)
    over = _over(alpha, exponent, pos.max(axis=0), neg.max(axis=0), 1 / 64 - alpha * P.min(axis=0), NARROW[0])
    collisions = (np.diff(np.sort(G, axis=0), axis=0) == 0).sum(axis=0)
    return collisions + 2 ** NARROW[0] / 2 * np.maximum(0, over - 1)


def _pairs(X: np.ndarray, grid: np.ndarray, least: int) -> list[np.ndarray]:
    """Up to PAIRS starts w = e_a + m·e_b (a ≠ b, m one more than coordinate a's spread on the
    grid, so that w·x tells apart tokens that differ on a or b), least cost first (_cost), ties
    to the earlier pair. No start where the grid spreads beyond 2^20: no 8-bit t holds such keys."""
    d = grid.shape[1]
    span = grid.max(axis=0) - grid.min(axis=0) + 1
    if d < 2 or span.max() > 2 ** 20:
        return []
    a, b = (v.ravel() for v in np.meshgrid(np.arange(d), np.arange(d), indexing="ij"))
    a, b = a[a != b], b[a != b]
    m = span[a]
    G, P = grid[:, a] + grid[:, b] * m, X[:, a] + X[:, b] * m
    absolute = np.abs(X[:, a]) + np.abs(X[:, b]) * m
    cost = _cost(G, P, (absolute + P) / 2, (absolute - P) / 2, least)
    out = []
    for j in np.argsort(cost, kind="stable")[:PAIRS]:
        w = np.zeros(d, dtype=np.int64)
        w[a[j]], w[b[j]] = 1, m[j]
        out.append(w)
    return out


def _over(alpha, exponent, positive, negative, beta, p: int):
    """t = α·w·x + β's sums against the exact evaluation lemma's range, in precision p: the larger
    of the positive terms' sum (β among them where β > 0) and the negative ones', over 2^(p+E),
    the terms a multiple of 2^E, E = min(log2 α + ``exponent``, −6) (β = 1/64 − α·min(w·x) shares
    the grid of 2^-6); ``exponent``: the least bits of the tokens' weighed coordinates and of w.
    At most 1 where a run computes every t exactly. Scalars or numpy arrays alike."""
    room = 2.0 ** (p + np.minimum(np.log2(alpha) + exponent, -6))
    return np.maximum(alpha * positive + np.maximum(beta, 0), alpha * negative + np.maximum(-beta, 0)) / room


def _powers(spread: np.ndarray) -> np.ndarray:
    """_scaling's power-of-two α per spread of w·x: the largest α ≤ 1 with α·spread ≤ 1/64."""
    return np.minimum(1.0, 2.0 ** np.floor(-np.log2(64 * np.where(spread > 0, spread, 1 / 64))))


def _trailing(w: np.ndarray, ks: np.ndarray, ms: np.ndarray) -> np.ndarray:
    """Per move (entry ks[j] by ms[j]): the least exponent of two dividing every non-zero entry of
    the moved w, the grid of its terms; −1 where the moved w is 0."""
    def zeros(v):  # the exponent of two of each entry; 64 for a zero
        v = np.abs(v)
        return np.where(v == 0, 64, np.log2(np.where(v == 0, 1, v & -v)).astype(np.int64))
    own = zeros(w)
    least, second = np.sort(np.append(own, [64, 64]))[:2]
    others = np.where(own[ks] == least, second, least)  # the least over the entries a move leaves
    low = np.minimum(others, zeros(w[ks] + ms))
    return np.where(low == 64, -1, low)


def _integral(w: Vec) -> bool:
    return all(v.q == 1 for v in w)


Grain = tuple[int | None, int] | None  # per coordinate: (least exponent, most significant bits), None: not dyadic


def _grains(tokens: list[Vec], d: int) -> list[Grain]:
    """Per coordinate: (the least exponent v with every token's value a multiple of 2^v, None
    where every value is 0; their most significant bits), or None where some value is not a
    dyadic (a float run rounds it: no projection that weighs it is exact)."""
    out: list[Grain] = []
    for c in range(d):
        values = [(int(x[c].p), int(x[c].q)) for x in tokens if x[c]]
        if any(den & (den - 1) for _, den in values):
            out.append(None)
            continue
        lows = [(num & -num).bit_length() - den.bit_length() for num, den in values]
        bits = [(abs(num) >> ((num & -num).bit_length() - 1)).bit_length() for num, _ in values]
        out.append((min(lows, default=None), max(bits, default=0)))
    return out


def _grain(grains: list[Grain], on) -> tuple[int, int] | None:
    """(the least exponent v with every value of the coordinates ``on`` a multiple of 2^v, their
    most significant bits), or None where one of them is not a dyadic. A coordinate a direction
    does not weigh is not read: 0·x̂ is 0, whatever x̂ rounds to."""
    if any(grains[c] is None for c in on):
        return None
    lows = [grains[c][0] for c in on if grains[c][0] is not None]
    return (min(lows) if lows else 0), max((grains[c][1] for c in on), default=0)


def _distinct(keys: list[fmpq]) -> bool:
    keys = ordered(keys)  # sorted, not hashed: rational hashing is slow
    return all(a != b for a, b in zip(keys, keys[1:]))


def _conditioned(seqs, means: list[Vec], leaders: list[int], plan: list[Vec], d: int, softmax: bool,
                 spaced: bool = False):
    """w, (α, β), λ, every token's t after the bumps, and the bumps: among
    the dense candidates, the coordinate axes and sparse directions
    (hats.sparse) and λ = 0 or a small rational, SHIFTS at a time (shift_chunks), the
    pair a float run keeps apart best (_ranking, in float64), the first that
    checks exactly: w gives distinct tokens distinct projections, the plan's
    bumps keep distinct means apart (_bumped), and the shifted values
    t + λ·t̄_j are pairwise distinct. Where float64 ranks none (values beyond
    its range, or every candidate colliding), direction() — on which distinct
    tokens and distinct means project apart, so that all but finitely many λ
    separate — and the first λ that separates, 0 first as among the ranked."""
    tokens = [x for s in seqs for x in s]
    values, points = distinct_sorted(tokens + means), distinct_sorted(tokens)
    candidates = _candidates(tokens, d)
    tried: dict[int, tuple | None] = {}

    def shifted(i: int, lam: fmpq) -> tuple | None:
        """((α, β), t after the bumps, the bumps) when candidate i with λ separates everything
        exactly, else None."""
        if i not in tried:
            w = candidates[i]
            on = nonzero(w)  # w·x over w's non-zero entries (axes, sparse ones)
            ok = any(w) and _distinct([sparse_dot(on, x) for x in points])
            tried[i] = None
            if ok:
                projected = [[sparse_dot(on, x) for x in s] for s in seqs]
                alpha, beta = _scaling([v for row in projected for v in row], _integral(w))
                bumped = _bumped([[alpha * v + beta for v in row] for row in projected], seqs, means, plan,
                                 alpha / power_below(alpha))
                tried[i] = None if bumped is None else ((alpha, beta), *bumped)
        if tried[i] is None:
            return None
        ts = tried[i][1]
        keys = [t + s for row, s in zip(ts, mean_shifts(ts, lam)) for t in row]
        return tried[i] if _distinct(keys) else None

    for lams, ranked in ranked_shifts(seqs, leaders, plan, candidates, d, softmax, spaced):
        for *_, i, j in ranked:
            if (found := shifted(i, lams[j])) is not None:
                return candidates[i], found[0], lams[j], *found[1:]
    w = direction(values, d)
    candidates.append(w)
    for lam in chain((ZERO,), small_rationals()):  # λ = 0 first, as ranked; else one of the first few
        if (found := shifted(len(candidates) - 1, lam)) is not None:
            return w, found[0], lam, *found[1:]
    raise AssertionError("unreachable")


# The float error a run may add, relative to what the later phases tolerate, in units of u (a
# ranking: the same in every format). A leader hat's plateau is ≈ 0.43 × the gap around its
# leader and its window's edge ≈ 0.5 × that gap from the neighbours: their errors in t must stay
# below it (PLATEAU). A token above a hat's window is dropped with all four units on: their
# slopes |δ|/ε ≤ 4/ε cancel, but a float run rounds each product, γ_5·4·4·Δ/ε for a token Δ
# above the window; the collapse's argmax gaps between one sequence's leaders (≈ 0.02, the
# leaders' angles) tolerate errors of about 1e-3 there (DROP). A hat whose leader's and
# neighbour's errors together exceed FULL × the gap between them has no room left for its plateau
# and margin in a binary32 run (u = 2^-24): such a pair ranks after every pair without one, the
# plateau alone deciding among them — the drops' errors, large or not, grow a bound, while a unit
# within its error bound of 0 ends the analysis.
PLATEAU = 2.5
DROP = 5 * 4 * 4 / 1e-3
FULL = 0.75 * 2 ** 24


def _ranking(seqs, leaders: list[int], plan: list[Vec], candidates: list[Vec],
             lams: list[fmpq], d: int, softmax: bool, spaced: bool = False) -> list[tuple] | None:
    """The keys (exactness level, crowded, badness, candidate, λ) of the
    (candidate, λ) index pairs that float64 tells apart, best first (None where it tells no
    candidate's tokens apart, whatever λ: values beyond its range, or every candidate colliding): by
    the largest predicted error of the leader phase relative to what it
    tolerates (_badness), on the values of t after the plan's bumps
    (_bumped's rule, in float64). The levels: 0 and 1, a t that bfloat16
    or binary16 computes exactly, unshifted (λ = 0: a mean shift's float
    mean is not exact); 2, with ``spaced``, a hardmax dataset of at most
    HALF_TOKENS tokens whose exact t, shifted, leaves SPACED binary16
    spacings between a leader and its neighbours after their errors (_room),
    ranked by that room (construct's second try where binary16 has no claim:
    bundle.build; survey seeds 164 and 173 got binary16 claims of 0 so); 3,
    the rest. Keys are rounded to 1/32 of a binary order
    of magnitude, so that the order does not hang on float64 noise, ties
    going to the earlier candidate, then the earlier λ."""
    tokens = [x for s in seqs for x in s]
    grains = _grains(tokens, d) if len(tokens) <= INDEXED else None
    try:
        X = np.array([[float(v) for v in x] for s in seqs for x in s], dtype=np.float64).reshape(-1, d)
        W = np.array([[float(v) for v in w] for w in candidates], dtype=np.float64).T
    except OverflowError:
        return None
    keys = []
    with np.errstate(all="ignore"):
        # first the candidates that tell the distinct tokens apart
        keep = np.flatnonzero((np.diff(np.sort(np.unique(X, axis=0) @ W, axis=0), axis=0) > 0).all(axis=0))
        if not len(keep):
            return None
        W = W[:, keep]
        seq = np.repeat(np.arange(len(seqs)), [len(s) for s in seqs])
        count = np.bincount(seq).astype(np.float64)

        def per_sequence(values):  # each token's sequence mean of ``values``
            return (np.add.reduceat(values, np.r_[0, np.cumsum(count[:-1])].astype(int), axis=0) / count[:, None])[seq]

        P = X @ W
        spread = P.max(axis=0) - P.min(axis=0)
        power = np.array([_integral(candidates[i]) for i in keep], dtype=bool)
        alpha = _powers(spread)
        alpha = np.where((alpha < 1) & ~power,
                         alpha * np.clip(np.floor(8 / (64 * alpha * np.where(spread > 0, spread, 1.0))), 8, 15) / 8,
                         alpha)
        beta = 1 / 64 - alpha * P.min(axis=0)
        level = _exactness(grains, P, np.abs(X) @ np.abs(W), alpha, beta, [candidates[i] for i in keep], power)
        t = _bumped_floats(alpha * P + beta, [x for s in seqs for x in s], plan,
                           alpha / 2.0 ** np.floor(np.log2(alpha)))  # α's mantissa
        inexact = (X.astype(np.float32).astype(np.float64) != X).astype(np.float64)
        E_ff = ((np.count_nonzero(W, axis=0) + 1) * (alpha * (np.abs(X) @ np.abs(W)) + np.abs(beta))
                + alpha * ((np.abs(X) * inexact) @ np.abs(W)) + np.abs(beta))
        E_ff = np.where(level < len(NARROW), 0.0, E_ff)  # computed exactly
        lead = np.zeros(P.shape, dtype=bool)
        for start, s, m in zip(np.r_[0, np.cumsum([len(s) for s in seqs])], seqs, leaders):
            top = np.argsort(-P[start:start + len(s)], axis=0, kind="stable")[:m]  # the m_j largest t
            np.put_along_axis(lead[start:start + len(s)], top, True, axis=0)
        tbar, Ebar = per_sequence(t), per_sequence(E_ff)
        mean = _mean_error(t, tbar, Ebar, count[seq, None], seq, softmax)
        eligible = (spaced and not softmax and len(tokens) <= HALF_TOKENS) & (level < len(NARROW))  # exact t
        for j, lam in enumerate(map(float, lams)):
            s = t + lam * tbar
            E = E_ff if lam == 0 else E_ff + lam * mean + (d + 4) * s
            full, bad = _badness(s, lead, E)
            room = _room(s, _shift_error(tbar, count[seq, None], lam), lead) if lam and eligible.any() \
                else np.zeros(len(keep))
            apart = eligible & (room >= SPACED)
            rank = np.where(apart, 1 / np.maximum(room, SPACED), bad)  # the spaced shifts by their room
            keys += [(int(v) if lam == 0 and v < len(NARROW) else len(NARROW) + (not a), bool(f) and not a,
                      np.round(np.log2(np.maximum(r, 2.0 ** -1000)) * 32), int(i), j)
                     for i, v, f, b, a, r in zip(keep, level, full, bad, apart, rank) if np.isfinite(b)]
    return sorted(keys)


SPACED = 5  # the least room (binary16 spacings, both neighbours' errors taken off) that ranks a shift as spaced


def _spacing16(v: np.ndarray) -> np.ndarray:
    return 2.0 ** (np.floor(np.log2(np.abs(v))) - 10)


def _shift_error(tbar: np.ndarray, n: np.ndarray, lam: float) -> np.ndarray:
    """Per token and candidate: the error the float analysis finds in a hardmax binary16 run's
    t + λ·t̄ where t is exact. A mean of at most RUN_TERMS values has every evaluation known
    (verify/determined.py): about half a spacing of the key, none of the mean where n is a power
    of two and none of λ's product where λ is. A longer mean is bounded: γ_{n+1}·t̄, and the
    attention's output γ_5·(t + λ·t̄) (the residual sum and V's low-rank product, in any form)."""
    u = 2.0 ** -11
    key = tbar * (1 + lam)  # about t + λ·t̄
    known = np.where(np.log2(n) % 1 == 0, 0.0, _spacing16(tbar) / 2) * lam \
        + (0.0 if np.log2(lam) % 1 == 0 else _spacing16(lam * tbar) / 2) + _spacing16(key) / 2
    return np.where(n <= RUN_TERMS, known, lam * (n + 1) * u * tbar + 5 * u * key)


def _room(s: np.ndarray, e: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """Per column: the least gap between a leader's value ``s`` and its neighbours' less both
    ends' errors ``e``, in binary16 spacings at the largest value. Only a leader's hat has a
    window: two other tokens may lie as close as they like."""
    if len(s) < 2:
        return np.full(s.shape[1], np.inf)
    order = np.argsort(s, axis=0)
    ss, es, ls = (np.take_along_axis(a, order, axis=0) for a in (s, e, lead))
    room = np.diff(ss, axis=0) - es[1:] - es[:-1]
    room = np.where(ls[1:] | ls[:-1], room, np.inf)
    return room.min(axis=0) / _spacing16(ss[-1])


def crowded(seqs, leaders: list[int], d: int, softmax: bool) -> bool:
    """Whether no projection of these tokens, with any λ, leaves every leader hat room in binary32
    (the best ranked pair is not exact and leaves some leader's and neighbour's errors in t over
    3/4 of their gap, or float64 ranks none): the compression's test (compress.py)."""
    means = sequence_means(seqs)
    candidates, plan = _candidates([x for s in seqs for x in s], d), bump_plan(seqs, means)
    for _, keys in ranked_shifts(seqs, leaders, plan, candidates, d, softmax):
        if keys:
            return keys[0][0] >= len(NARROW) and keys[0][1]
    return True


NARROW = (8, 11)  # the precisions of bfloat16 and binary16


def _exactness(grains: list[Grain] | None, P: np.ndarray, P_abs: np.ndarray, alpha: np.ndarray,
               beta: np.ndarray, candidates: list[Vec], power: np.ndarray) -> np.ndarray:
    """Per candidate: the first of NARROW in which a float run computes every token's t = α·w·x + β
    exactly by the exact evaluation lemma (verify/floats.py, exact_sum) — 0 for bfloat16, 1 for
    binary16 — or len(NARROW): α a power of two, each token's sums within the lemma's range (_over;
    the signs are known, since the inputs are: verify/determined.py, total) and the coordinates w
    weighs numbers of the format. ``P``, ``P_abs``: per token and candidate w·x and Σ_k |w_k x_k|.
    A ranking (float64): the analysis decides."""
    out = np.full(len(candidates), len(NARROW))
    if grains is None:
        return out
    positive, negative = (P_abs + P) / 2, (P_abs - P) / 2
    for c, w in enumerate(candidates):
        if not power[c] or (grain := _grain(grains, [j for j, v in enumerate(w) if v])) is None:
            continue
        least, bits = grain
        low = min((int(v.p) & -int(v.p)).bit_length() - 1 for v in w if v)
        for level, p in enumerate(NARROW):
            if bits <= p and _over(alpha[c], least + low, positive[:, c].max(), negative[:, c].max(), beta[c], p) <= 1:
                out[c] = level
                break
    return out


def _mean_error(t: np.ndarray, tbar: np.ndarray, Ebar: np.ndarray, n: np.ndarray, seq: np.ndarray,
                softmax: bool) -> np.ndarray:
    """Per token and candidate: the error of its sequence's float mean of t (units of u) as the
    float analysis bounds a uniform attention's (verify/float_analysis.py, _uniform), plus λ's
    rounding: hardmax's n − 1 sums and a division, γ_{n+1}; softmax's weights, each within
    κ = 4u of 1/n, make it about γ_{2n} on the mean's magnitude (the analysis's
    (1 + γ_{n+2})/(1 − γ_{n−1}) − 1, which also covers a rounded reciprocal, is one u more: a
    ranking, not a bound), plus β ≈ 2κ = 8u on the half-spread of the sequence's t (β times the
    errors: second order)."""
    if not softmax:
        return Ebar + (n + 2) * tbar
    starts = np.r_[0, np.flatnonzero(np.diff(seq)) + 1]
    half = ((np.maximum.reduceat(t, starts, axis=0) - np.minimum.reduceat(t, starts, axis=0)) / 2)[seq]
    return Ebar + (2 * n + 1) * tbar + 8 * half


def _bumped_floats(t: np.ndarray, tokens: list[Vec], plan: list[Vec], unit: np.ndarray) -> np.ndarray:
    """Per column (a candidate): every token's t (rows) after the plan's
    bumps by _bumped's rule, in float64 (no halving: a merge of means is
    found by the exact check)."""
    t = t.copy()
    for c in plan:
        rows = np.array([x == c for x in tokens])
        diff = t - t[rows][0]
        below = np.where(diff < 0, -diff, np.inf).min(axis=0)
        above = np.where(diff > 0, diff, np.inf).min(axis=0)
        gap = np.minimum(below, above)
        t[rows] += np.where(above >= below, 1.0, -1.0) * unit * 2.0 ** np.floor(np.log2(gap / (4 * unit)))
    return t


def _badness(s: np.ndarray, lead: np.ndarray, E: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column (a candidate): the largest predicted error over the leader
    hats relative to what they tolerate (in units of u; inf where two values
    of ``s`` coincide), from every token's shifted value ``s``, whether it
    is a leader, and its error in t ``E`` (units of u): the FF's
    (k+1)·(α·Σ_k|w_k x_ik| + |β|) for a k-term dot product plus the input's
    and β's rounding, and where λ ≠ 0 the SA's (the mean's, and V's, a
    d-term product in the float run's dense form: (d+4)·(|t_i| + λ|t̄_j|)).
    And whether some hat's leader and neighbour err by more than FULL × their gap, where the
    plateau's ratio alone is the badness."""
    n, C = s.shape
    if n < 2:
        return np.zeros(C, dtype=bool), np.zeros(C)
    order = np.argsort(s, axis=0)  # ties make the pair collide (inf) whatever their order
    ss, ls, Es = (np.take_along_axis(a, order, axis=0) for a in (s, lead, E))
    g = np.diff(ss, axis=0)
    inf, zero = np.full((1, C), np.inf), np.zeros((1, C))
    gap = np.minimum(np.vstack([inf, g]), np.vstack([g, inf]))
    near = np.maximum(np.vstack([zero, Es[:-1]]), np.vstack([Es[1:], zero]))
    ratio = (Es + near) / gap
    # what each leader's hat drops: the tokens up to the next leader above (later hats run below)
    rows = np.arange(n)[:, None]
    above = np.minimum.accumulate(np.where(ls, rows, n)[::-1], axis=0)[::-1]
    nxt = np.vstack([above[1:], np.full((1, C), n)])
    top = np.take_along_axis(ss, np.maximum(nxt - 1, rows), axis=0)
    eps = np.minimum(1 / 16, 2.0 ** np.floor(np.log2(np.minimum(gap, 1.0) / 16)))  # leaders.py's ε
    worst = np.where(ls, ratio, 0.0).max(axis=0)
    full = worst > FULL
    bad = np.where(ls, np.maximum(PLATEAU * ratio, DROP * (top - ss) / eps), 0.0).max(axis=0)
    bad = np.where(full, PLATEAU * worst, bad)
    return full, np.where((g > 0).all(axis=0) & np.isfinite(bad), bad, np.inf)

