"""Shortcuts: what the replay evaluates, never how. Each one decides which
tokens or which scores need the formula of layers.py, and is proved here to
choose a superset of what matters; tests/test_fast_paths.py checks each
against the formula on random inputs.

* FF support (``ff_support``): with η = 1 a unit group's contribution
  vanishes outside an interval of its direction, proven exactly from the
  weights; tokens are kept sorted by projection (``Ranked``), so the tokens
  inside are found by binary search and every other token is unchanged.
* planar argmax (``attention_table``): when a hardmax score is a dot product
  in the plane, the argmax and the runner-up lie among a few points of the
  keys' convex layers, which are scored exactly as the formula says.
* binary64 filter (``_filtered_table``): where more than FILTERED keys remain
  (keys in convex position, or any A in d ≥ 3), binary64 scores with a proven
  error bound rule out the keys that cannot score best or second best, and the
  rest are scored exactly: the same Attention, exact, without n² exact scores.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from math import inf

from flint import fmpq
from sortedcontainers import SortedList

from tfcert.verify.formats import FF, LowRank, nonzero
from tfcert.verify.layers import Attention, Scores, apply_low_rank, attention_of, sparse_dot
from tfcert.verify.numbers import ONE, ZERO, Vec, key


# ---------------------------------------------------------------- planar argmax

def attention_table(A: LowRank, X: list[Vec]) -> list[Attention]:
    """Every token's hardmax attention in one sequence. When each score is a
    dot product in the plane — A = Σ u vᵀ of rank one or two (query v·x_i,
    key u·x_l, a rank-one form padded with a zero), or d = 2 (query A x_i,
    key x_l) — by convex layers: a sort and a few scores per query. Else
    from the exact scores that a binary64 filter leaves (every score where the
    sequence is short)."""
    if len(X) > 2 and A.scale == 0 and 1 <= len(A.terms) <= 2:
        pad = (ZERO,) * (2 - len(A.terms))
        us, vs = ([tuple((j, c) for j, c in enumerate(w) if c) for w in side] for side in zip(*A.terms))
        return _planar_table([tuple(sparse_dot(v, x) for v in vs) + pad for x in X],  # v·x over v's non-zeros
                             [tuple(sparse_dot(u, x) for u in us) + pad for x in X])
    if len(X) > 2 and len(X[0]) == 2:
        return _planar_table([apply_low_rank(A, x) for x in X], X)
    table = Scores(A, X)
    if len(X) > FILTERED:
        return _filtered_table([apply_low_rank(A, x) for x in X], X, table.row)
    return [attention_of(table.row(i)) for i in range(len(X))]


# ---------------------------------------------------------------- argmax by a binary64 filter

FILTERED = 32  # longer sequences have their scores filtered in binary64 first


def _binary64(vectors: list[Vec], np, each: bool):
    """The vectors times a power of two that puts their largest coordinate in (1/2, 2), so
    nothing overflows (``each``: one per vector, else one for all), in binary64: each
    coordinate rounded once (float of an fmpq is int / int, correctly rounded), within 2^-53
    of its value relative, or 2^-1075 absolute below the normal range."""
    def scale(values) -> fmpq:
        top = max(map(abs, values), default=ZERO)
        return fmpq(2) ** (int(top.q).bit_length() - int(top.p).bit_length()) if top else ONE
    common = None if each else scale([v for x in vectors for v in x])
    rows = []
    for x in vectors:
        g = scale(x) if each else common
        rows.append([float(v * g) for v in x])
    return np.array(rows, dtype=np.float64)


def _filtered_table(queries: list[Vec], keys: list[Vec], row) -> list[Attention]:
    """Each query's attention from exact scores (``row(i, at)``) at the few keys that may
    score best or second best, one key of each value standing for its copies and one query
    of each value answered once. The keys less the first (every score less one constant, so
    keys close together are told apart by their differences) are scaled by one power of two,
    each query by its own (a score by a factor > 0: the same order), and rounded to binary64
    (_binary64). A score ŝ = q̂·x̂ of d products, in any order, fused or not, is then within
    err = (2d + 8)·2^-52·(|q̂|·|x̂|) + 2^-51·|ŝ| + (16d + 16)·2^-1074 of the scaled q·x:
    γ_{d+2} on the terms' magnitudes (Higham, §3.1), doubled for the rounding of the bound
    itself, and absolute terms for the inputs' and the products' underflow (the scaling
    leaves every |x̂|, |q̂| below 2). A key whose upper bound ŝ + err is below the largest
    lower bound ŝ − err scores less than that key exactly: it is not in the argmax; among the
    keys outside the argmax, the same rule leaves the runner-up's candidates."""
    import numpy as np  # here only: the checker starts without it

    copies: dict[tuple, list[int]] = {}
    for l, x in enumerate(keys):
        copies.setdefault(key(x), []).append(l)
    members = list(copies.values())  # the keys of each value; the first stands for them
    shifted = [tuple(v - c for v, c in zip(keys[same[0]], keys[0])) for same in members]  # q·(x − x₀)
    K = _binary64(shifted, np, False)
    names = [key(q) for q in queries]
    first: dict[tuple, int] = {}  # each distinct query: where it first occurs
    for i, name in enumerate(names):
        first.setdefault(name, i)
    Q = _binary64([queries[i] for i in first.values()], np, True)
    answers = {name: _filtered_row(np, K, q, members, lambda at, i=i: row(i, at))
               for (name, i), q in zip(first.items(), Q)}
    return [answers[name] for name in names]


def _filtered_row(np, K, q, members: list[list[int]], row) -> Attention:
    """One query's Attention by _filtered_table's rule: K's rows are the keys members[c][0]."""
    d = K.shape[1]
    with np.errstate(all="ignore"):  # a bound that is not finite scores the query in full
        s = K @ q
        err = ((2 * d + 8) * 2.0 ** -52 * (np.abs(K) @ np.abs(q)) + 2.0 ** -51 * np.abs(s)
               + (16 * d + 16) * 2.0 ** -1074)
        lo, hi = s - err, s + err
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        return attention_of(row(None))
    first = np.flatnonzero(hi >= lo.max()).tolist()
    exact = dict(zip(first, row([members[c][0] for c in first])))
    best = max(exact.values())
    top = {c for c in first if exact[c] == best}
    argmax = tuple(sorted(l for c in top for l in members[c]))
    if len(top) == len(members):
        return Attention(argmax, None)
    lo[sorted(top)] = -np.inf
    second = [c for c in np.flatnonzero(hi >= lo.max()).tolist() if c not in top]
    missing = [c for c in second if c not in exact]
    exact.update(zip(missing, row([members[c][0] for c in missing])))
    return Attention(argmax, best - max(exact[c] for c in second))


def _edges(points: list[Vec]) -> list[list[Vec]]:
    """The boundary of the hull of ``points`` (distinct, sorted) as its edges,
    each the list of the points on it in order, ends included: Andrew's
    monotone chains, popping only at a strict right turn, cut where they turn."""
    def cross(o: Vec, a: Vec, b: Vec) -> fmpq:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    edges = []
    for seq in (points, points[::-1]):
        chain: list[Vec] = []
        for p in seq:
            while len(chain) >= 2 and cross(chain[-2], chain[-1], p) < 0:
                chain.pop()
            chain.append(p)
        edge = chain[:1]
        if len(chain) == 1:  # one point: an edge of its own
            edges.append(edge)
        for k, p in enumerate(chain[1:], 1):
            edge.append(p)
            if k == len(chain) - 1 or cross(chain[k - 1], p, chain[k + 1]) != 0:
                edges.append(edge)
                edge = [p]
    return edges


def _planar_table(queries: list[Vec], keys: list[Vec]) -> list[Attention]:
    """Scores q_i·k_l in the plane. For q ≠ 0 the argmax set lies on the
    boundary L1 of the keys' hull, the best score outside it on L1 or on the
    boundary L2 of the hull of the keys inside L1 (it is the best of those
    too). Along an edge a score is monotone, or constant when q is normal to
    it: the ends of each edge and, on L1, their neighbours carry the best and
    the second best; an edge whose ends both score best joins the argmax
    whole. The same Attention as from all n scores."""
    ids: dict[tuple, list[int]] = {}
    for l, k in enumerate(keys):
        ids.setdefault(key(k), []).append(l)
    points = distinct_sorted(keys)
    first = _edges(points)
    on_first = {key(p) for edge in first for p in edge}
    second = _edges([p for p in points if key(p) not in on_first])
    near = distinct_sorted([p for e in first for p in (e[:2] + e[-2:])] + [p for e in second for p in (e[0], e[-1])])
    near_names = [key(p) for p in near]
    edges = [[key(p) for p in edge] for edge in first]
    names = [key(q) for q in queries]
    asked = list({name: q for name, q in zip(names, queries) if any(q)}.items())  # distinct, not 0

    def row(i: int, at: list[int] | None = None) -> list[fmpq]:
        q = asked[i][1]
        return [q[0] * p[0] + q[1] * p[1] for p in (near if at is None else [near[l] for l in at])]
    found = (_filtered_table([q for _, q in asked], near, row) if len(near) > FILTERED  # keys in convex position
             else [attention_of(row(i)) for i in range(len(asked))])
    memo = {name: Attention(tuple(range(len(keys))), None) for name, q in zip(names, queries) if not any(q)}
    for (name, _), att in zip(asked, found):
        top = {near_names[a] for a in att.argmax}
        for edge in edges if len(top) > 1 else ():  # two ends score best: the edge between them too
            if edge[0] in top and edge[-1] in top:
                top.update(edge)
        memo[name] = Attention(tuple(sorted(l for n in top for l in ids[n])), att.gap)
    return [memo[n] for n in names]


def distinct_sorted(items: list) -> list:
    """The distinct items, sorted (sorting, not hashing: rational hashes are slow)."""
    ordered = sorted(items)
    return [x for k, x in enumerate(ordered) if k == 0 or x != ordered[k - 1]]


# ---------------------------------------------------------------- FF support

@dataclass(frozen=True)
class Support:
    """Tokens with ``lo < direction·x < hi`` may change; no others can.
    ``direction`` None means every token may change."""
    direction: Vec | None
    lo: fmpq | None = None
    hi: fmpq | None = None  # None: unbounded above


def ff_support(ff: FF) -> list[Support]:
    """Where each group of units (same U row) can contribute.

    For a group with offsets b_j the contribution Σ W_j σ(t + b_j), t = u·x,
    is 0 for t ≤ min(−b_j); for t ≥ max(−b_j) it is (Σ W_j) t + Σ W_j b_j,
    which vanishes identically iff both sums are the zero vector.
    """
    if ff.eta != 1:
        return [Support(None)]
    groups: OrderedDict[tuple, tuple[Vec, list[int]]] = OrderedDict()
    for j, row in enumerate(ff.U):
        groups.setdefault(key(row), (row, []))[1].append(j)
    out = []
    for row, units in groups.values():
        cols = [tuple(w[j] for w in ff.W) for j in units]  # (truth, not == 0: an fmpq's == converts the int)
        if not any(any(col) for col in cols):
            continue
        if not any(row):  # constant units: a shift of every token
            if any(ff.b[j] > 0 for j, col in zip(units, cols) if any(col)):
                return [Support(None)]
            continue
        breaks = [-ff.b[j] for j in units]
        written = [i for i in range(len(ff.W)) if any(col[i] for col in cols)]  # a row no unit writes adds 0
        compact = all(not sum((col[i] for col in cols), ZERO) and
                      not sum((col[i] * ff.b[j] for j, col in zip(units, cols)), ZERO) for i in written)
        out.append(Support(row, min(breaks), max(breaks) if compact else None))
    return out


# ---------------------------------------------------------------- tokens sorted by a value

def float_key(v: fmpq | float) -> float:
    """v to the nearest float (Python's int / int rounds correctly), ±inf
    beyond the range: monotone, so (float_key(v), v) sorts as v does."""
    if isinstance(v, float):
        return v
    try:
        return int(v.p) / int(v.q)
    except OverflowError:
        return inf if v > 0 else -inf


class Ranked:
    """Token ids sorted by a value each (an exact projection; a bound in the
    float analysis), as (rounded value, value, id) entries in a
    sortedcontainers SortedList: a token moves when its value changes in
    O(log n), where a flat list would shift half of its entries; the float
    in front settles most comparisons, where comparing rationals is slow."""

    def __init__(self, values: list[fmpq]):
        self.entry = [(float_key(v), v, g) for g, v in enumerate(values)]
        self.ordered = SortedList(self.entry)

    def _cut(self, lo: fmpq, hi: fmpq | None) -> tuple[int, int]:
        """Positions of the first value > lo and of the first value ≥ hi
        (ids < len: (v, len) follows every (v, g))."""
        start = self.ordered.bisect_right((float_key(lo), lo, len(self.entry)))
        return start, len(self.ordered) if hi is None else self.ordered.bisect_left((float_key(hi), hi, -1))

    def inside(self, lo: fmpq, hi: fmpq | None) -> list[int]:
        """The ids with lo < value < hi (hi None: no upper end)."""
        return [g for _, _, g in self.ordered.islice(*self._cut(lo, hi))]

    def outside(self, lo: fmpq, hi: fmpq) -> tuple[fmpq | None, fmpq | None]:
        """The largest value ≤ lo and the least value ≥ hi (None where none is)."""
        start, stop = self._cut(lo, hi)
        below = self.ordered[start - 1][1] if start else None
        return below, self.ordered[stop][1] if stop < len(self.ordered) else None

    def move(self, g: int, new: fmpq) -> None:
        if new != self.entry[g][1]:
            self.ordered.remove(self.entry[g])
            self.entry[g] = (float_key(new), new, g)
            self.ordered.add(self.entry[g])


def direction_of(row: Vec) -> tuple[Vec, fmpq]:
    """row = g·r with g > 0 the first non-zero entry's absolute value (g = 1
    for a zero row): one ranking on r serves every positive multiple of r
    (a construction scales its hats' rows by powers of two)."""
    g = next((abs(v) for v in row if v), ONE)
    return (row if g == 1 else tuple(v / g for v in row)), g


class Scaled:
    """A ranking on r read as one on g·r, g > 0: g·r·x lies in (lo, hi) exactly
    when r·x lies in (lo/g, hi/g), and each value on g·r is g times its value on r."""

    def __init__(self, ranked: Ranked, g: fmpq):
        self.ranked, self.g = ranked, g

    def inside(self, lo: fmpq, hi: fmpq | None) -> list[int]:
        return self.ranked.inside(lo / self.g, None if hi is None else hi / self.g)

    def outside(self, lo: fmpq, hi: fmpq) -> tuple[fmpq | None, fmpq | None]:
        return tuple(None if v is None else v * self.g for v in self.ranked.outside(lo / self.g, hi / self.g))


class Projections(Ranked):
    """Ranked by the exact projection on one direction (a sum over the
    direction's non-zero entries: FF rows are mostly sparse)."""

    def __init__(self, direction: Vec, tokens: list[Vec]):
        self.direction, self.support = direction, nonzero(direction)
        super().__init__([self.of(x) for x in tokens])

    def of(self, x: Vec) -> fmpq:
        return sparse_dot(self.support, x)
