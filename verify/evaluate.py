"""Exact replay of a model, one layer at a time — the one way tfcert
evaluates a layer.

A layer is always evaluated by its defining formula in exact rationals. Two
shortcuts decide *what* gets evaluated, never how:

* which tokens: a feed-forward layer with η = 1 changes a token only if some
  unit group's contribution is non-zero there, and ``ff_support`` proves,
  exactly, an interval of each group's direction outside which the
  contribution vanishes. Tokens are kept sorted by their projection on the
  directions in use, so the tokens inside those intervals are found by
  binary search; every other token is provably unchanged.
* which scores: when a hardmax score is a dot product in the plane, the
  argmax and the runner-up lie among a few points of the keys' convex
  layers (``_planar_table``), which are scored exactly as the formula says.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from math import inf, lcm
from typing import Iterator

from flint import arb, ctx, fmpq
from sortedcontainers import SortedList

from tfcert.verify.enclose import (PREC, Noise, Path, Token, as_balls, axis_of, bounds, box, is_point, noise,
                                   noise_bound, path, projection_range, rank_one, softmax_ball)
from tfcert.verify.formats import FF, SA, LowRank, Model
from tfcert.verify.numbers import Vec, add, bounded, dot, key, scale, sub, zero

ZERO = fmpq(0)


# ---------------------------------------------------------------- layer formulas

def relu(x: fmpq) -> fmpq:
    return x if x > 0 else ZERO


def apply_ff(ff: FF, x: Vec) -> Vec:
    """η x + W σ(U x + b), exactly, over the non-zero entries of U and W."""
    U, W = ff.sparse
    hidden = [relu(_sparse_dot(row, x) + bias) for row, bias in zip(U, ff.b)]
    kept = scale(ff.eta, x)
    return tuple(k + _sparse_dot(w_row, hidden) if w_row else k for k, w_row in zip(kept, W))


def _sparse_dot(row: tuple[tuple[int, fmpq], ...], x) -> fmpq:
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

    def row(self, i: int) -> list[fmpq]:
        q, scale, xi = self.queries[i], self.A.scale, self.X[i]
        out = []
        for x, k in zip(self.X, self.keys):
            total = scale * dot(xi, x) if scale != 0 else ZERO
            for a, b in zip(q, k):
                total += a * b
            out.append(total)
        return out


def attention_table(A: LowRank, X: list[Vec]) -> list[Attention]:
    """Every token's hardmax attention in one sequence. When each score is a
    dot product in the plane — A = Σ u vᵀ of rank one or two (query v·x_i,
    key u·x_l, a rank-one form padded with a zero), or d = 2 (query A x_i,
    key x_l) — by convex layers: a sort and a few scores per query. Else
    from all n² scores."""
    if len(X) > 2 and A.scale == 0 and 1 <= len(A.terms) <= 2:
        pad = (ZERO,) * (2 - len(A.terms))
        return _planar_table([tuple(dot(v, x) for _, v in A.terms) + pad for x in X],
                             [tuple(dot(u, x) for u, _ in A.terms) + pad for x in X])
    if len(X) > 2 and len(X[0]) == 2:
        return _planar_table([apply_low_rank(A, x) for x in X], X)
    table = Scores(A, X)
    return [attention_of(table.row(i)) for i in range(len(X))]


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
    mu = lcm(*(int(v.q) for p in near for v in p))  # the scores in integers: keys times μ, each query times λ
    whole = [tuple(int(v * mu) for v in p) for p in near]
    edges = [[key(p) for p in edge] for edge in first]
    names = [key(q) for q in queries]
    memo: dict[tuple, Attention] = {}
    for q, name in zip(queries, names):
        if name not in memo:
            if not any(q):
                memo[name] = Attention(tuple(range(len(keys))), None)
                continue
            lam = lcm(*(int(v.q) for v in q))
            qi = [int(v * lam) for v in q]
            att = attention_of([qi[0] * p[0] + qi[1] * p[1] for p in whole])  # λμ·score: same order, λμ·gap
            top = {near_names[a] for a in att.argmax}
            for edge in edges if len(top) > 1 else ():  # two ends score best: the edge between them too
                if edge[0] in top and edge[-1] in top:
                    top.update(edge)
            memo[name] = Attention(tuple(sorted(l for n in top for l in ids[n])),
                                   None if att.gap is None else fmpq(att.gap, lam * mu))
    return [memo[n] for n in names]


def distinct_sorted(items: list) -> list:
    """The distinct items, sorted (sorting, not hashing: rational hashes are slow)."""
    ordered = sorted(items)
    return [x for k, x in enumerate(ordered) if k == 0 or x != ordered[k - 1]]


def attention_of(s: list[fmpq]) -> Attention:
    best = max(s)
    argmax = tuple(l for l, v in enumerate(s) if v == best)
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
    out, table, noises = [], [], []
    rows = Scores(sa.A, X)
    for i, x in enumerate(X):
        s = rows.row(i)
        att = attention_of(s)
        nz = noise(s, values, att.argmax)
        if below:
            b = bounds(noise_bound(nz, tau))[1]
            lo, hi = nz.centre - b, nz.centre + b
        else:
            lo, hi = bounds(softmax_ball(s, values, tau))
        base = scale(sa.rho, x)
        out.append(path([add(base, scale(max(lo, floor), u)), add(base, scale(min(hi, ceil), u))]))
        table.append(att)
        noises.append(nz)
    return out, tuple(table), tuple(noises)


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
        cols = [tuple(w[j] for w in ff.W) for j in units]
        if all(all(c == 0 for c in col) for col in cols):
            continue
        if all(c == 0 for c in row):  # constant units: a shift of every token
            if any(ff.b[j] > 0 for j, col in zip(units, cols) if any(c != 0 for c in col)):
                return [Support(None)]
            continue
        breaks = [-ff.b[j] for j in units]
        slope = [sum((col[i] for col in cols), ZERO) for i in range(len(ff.W))]
        offset = [sum((col[i] * ff.b[j] for j, col in zip(units, cols)), ZERO)
                  for i in range(len(ff.W))]
        compact = all(v == 0 for v in slope) and all(v == 0 for v in offset)
        out.append(Support(row, min(breaks), max(breaks) if compact else None))
    return out


# ---------------------------------------------------------------- replay

def _float_key(v: fmpq) -> float:
    """v to the nearest float (Python's int / int rounds correctly), ±inf
    beyond the range: monotone, so (float_key(v), v) sorts as v does."""
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
        self.entry = [(_float_key(v), v, g) for g, v in enumerate(values)]
        self.ordered = SortedList(self.entry)

    def _cut(self, lo: fmpq, hi: fmpq | None) -> tuple[int, int]:
        """Positions of the first value > lo and of the first value ≥ hi
        (ids < len: (v, len) follows every (v, g))."""
        start = self.ordered.bisect_right((_float_key(lo), lo, len(self.entry)))
        return start, len(self.ordered) if hi is None else self.ordered.bisect_left((_float_key(hi), hi, -1))

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
            self.entry[g] = (_float_key(new), new, g)
            self.ordered.add(self.entry[g])


class _Projections(Ranked):
    """Ranked by the exact projection on one direction (a sum over the
    direction's non-zero entries: FF rows are mostly sparse)."""

    def __init__(self, direction: Vec, tokens: list[Vec]):
        self.direction, self.support = direction, tuple((j, v) for j, v in enumerate(direction) if v)
        super().__init__([self.of(x) for x in tokens])

    def of(self, x: Vec) -> fmpq:
        return _sparse_dot(self.support, x)


class Before:
    """The tokens before a layer, without a copy: the replay's list with the
    tokens the layer changed read from ``old``. Like the Step holding it, a
    view that is valid until the replay moves on to the next layer."""

    def __init__(self, now: list, old: dict[int, object]):
        self.now, self.old = now, old

    def __len__(self) -> int:
        return len(self.now)

    def __getitem__(self, g: int):
        return self.old[g] if g in self.old else self.now[g]

    def __iter__(self):
        return map(self.__getitem__, range(len(self.now)))


@dataclass(frozen=True)
class Step:
    """One layer of the replay: block index, "ff" or "sa", every token before
    and after it (flat, in dataset order; ``shape`` the sequences' lengths),
    and for an SA layer the attention of every token (None when the layer is
    skipped as the identity or A = 0). ``before``/``after`` group the tokens
    per sequence, built only when a claim asks for them. A Step is a view of
    the replay, not a copy: read it before asking for the next one."""
    block: int
    layer: str
    flat_before: list | Before
    flat_after: list
    shape: tuple[int, ...]
    attention: tuple[tuple[Attention, ...], ...] | None = None
    uniform: bool = False
    sorted_before: dict | None = None  # key(direction) -> _Projections, as they were before the layer
    noise: tuple[tuple[Noise, ...], ...] | None = None  # softmax, V = u vᵀ on points: every token's noise
    below: bool = False  # softmax enclosures hold at every temperature up to the model's
    exact: bool = True  # every token before and after the layer is an exact point

    @cached_property
    def before(self) -> tuple[tuple[Vec, ...], ...]:
        return _split(list(self.flat_before), self.shape)

    @cached_property
    def after(self) -> tuple[tuple[Vec, ...], ...]:
        return _split(self.flat_after, self.shape)

    def projections(self, direction: Vec) -> Ranked:
        """Flat token ids ranked by projection on ``direction`` before the layer."""
        proj = self.sorted_before.get(key(direction)) if self.sorted_before is not None else None
        return proj if proj is not None else _Projections(direction, list(self.flat_before))


def _split(flat: list, shape: tuple[int, ...]) -> tuple[tuple, ...]:
    out, start = [], 0
    for n in shape:
        out.append(tuple(flat[start:start + n]))
        start += n
    return tuple(out)


class Replay:
    """Exact replay of ``model`` on ``sequences`` (each a tuple of tokens).

    Softmax: layers are exact until a scored attention layer; from there a
    token may be an enclosure (enclose.py). ``temperature`` overrides the
    model's; ``below`` asks for enclosures valid at every temperature up to
    it (the noise bound) rather than at that temperature alone."""

    MAX_DIRECTIONS = 8

    def __init__(self, model: Model, sequences: list[tuple[Vec, ...]],
                 temperature: fmpq | None = None, below: bool = False):
        self.model = model
        self.tau = model.temperature if temperature is None else temperature
        self.below = below
        self.offsets = []
        flat: list[Vec] = []
        for seq in sequences:
            self.offsets.append(len(flat))
            flat.extend(seq)
        self.lengths = [len(s) for s in sequences]
        self.tokens: list = flat
        self.points = True  # every token is an exact point (not a softmax enclosure)
        self.index: OrderedDict[tuple, _Projections] = OrderedDict()  # by key(direction)
        self.old: dict[int, Vec] = {}  # the tokens the last layer changed, as they were before it

    def sequences(self) -> tuple[tuple[Vec, ...], ...]:
        return tuple(tuple(self.tokens[o:o + n]) for o, n in zip(self.offsets, self.lengths))

    def _projections(self, direction: Vec) -> _Projections:
        name = key(direction)
        proj = self.index.get(name)
        if proj is None:
            proj = self.index[name] = _Projections(direction, self.tokens)
            if len(self.index) > self.MAX_DIRECTIONS:
                self.index.popitem(last=False)
        else:
            self.index.move_to_end(name)
        return proj

    def _set(self, updates: dict[int, Vec]) -> None:
        for g, x in updates.items():
            if self.tokens[g] != bounded(x):
                self.old[g] = self.tokens[g]
                self.tokens[g] = x

    def _flush(self) -> None:
        """Move the last layer's changes into the sorted projections (they
        waited so that its Step could read them as before the layer); when
        many tokens changed, drop the projections: re-sorting is cheaper."""
        if len(self.old) > len(self.tokens) // 8:
            self.index.clear()
        for g in self.old:
            for proj in self.index.values():
                proj.move(g, proj.of(self.tokens[g]))
        self.old = {}

    def _enclosed(self, tokens: list) -> None:
        """Replace every token at once (softmax enclosures); projections are recomputed on demand."""
        for x in tokens:
            for vertex in x.vertices if isinstance(x, Path) else (x,) if is_point(x) else ():
                bounded(vertex)
        self.tokens = tokens
        self.index.clear()
        self.points = all(is_point(x) for x in tokens)

    def _ff(self, ff: FF) -> None:
        """Apply an FF layer."""
        if not self.points:  # enclosures: a token whose range misses every support is unchanged
            supports = ff_support(ff)
            if any(sup.direction is None for sup in supports):
                self._enclosed([apply_ff_token(ff, x) for x in self.tokens])
                return
            axes = [axis_of(sup.direction) for sup in supports]

            def may_change(x: Token) -> bool:
                for sup, axis in zip(supports, axes):
                    lo, hi = projection_range(x, sup.direction, axis)
                    if hi > sup.lo and (sup.hi is None or lo < sup.hi):
                        return True
                return False
            self._enclosed([apply_ff_token(ff, x) if may_change(x) else x for x in self.tokens])
            return
        candidates: set[int] = set()
        for sup in ff_support(ff):
            if sup.direction is None:
                candidates = set(range(len(self.tokens)))
                break
            candidates.update(self._projections(sup.direction).inside(sup.lo, sup.hi))
        self._set({g: apply_ff(ff, self.tokens[g]) for g in sorted(candidates)})

    def _sa(self, sa: SA) -> tuple[tuple[tuple[Attention, ...], ...] | None, bool]:
        d = self.model.d
        if sa.rho == 1 and is_zero_matrix(sa.V, d):
            return None, False
        uniform = is_zero_matrix(sa.A, d)
        updates: dict[int, Vec] = {}
        attention = []
        for seq, (o, n) in enumerate(zip(self.offsets, self.lengths)):
            X = self.tokens[o:o + n]
            if uniform:
                shift = apply_low_rank(sa.V, mean(X, range(n)))
                new = [add(scale(sa.rho, x), shift) for x in X]
            else:
                att = attention_table(sa.A, X)
                attention.append(tuple(att))
                new = apply_sa_hardmax(sa, X, att)
            updates.update({o + i: x for i, x in enumerate(new)})
        self._set(updates)
        return (None if uniform else tuple(attention)), uniform

    def _sa_softmax(self, sa: SA) -> tuple:
        """Returns (attention, uniform, noise) as for ``_sa``; tokens become
        enclosures where the attention is not exact."""
        d = self.model.d
        if sa.rho == 1 and is_zero_matrix(sa.V, d):
            return None, False, None
        uniform = is_zero_matrix(sa.A, d)
        points = self.points
        if uniform and points:
            return self._sa(sa)[0], True, None
        new, attention, noises = [], [], []
        for o, n in zip(self.offsets, self.lengths):
            X = self.tokens[o:o + n]
            if points and rank_one(sa.V) is not None:
                out, att, nz = sa_rank_one(sa, X, self.tau, self.below)
                attention.append(att)
                noises.append(nz)
            else:
                out = sa_boxes(sa, X, self.tau, uniform)
            new += out
        self._enclosed(new)
        scored = not uniform and len(attention) == len(self.lengths)
        return (tuple(attention) if scored else None), uniform, (tuple(noises) if scored else None)

    def _layer(self, apply):
        """Run one layer (``apply``); return the tokens before it, as a list
        (the layer replaced them) or a view of what it changed, and what
        ``apply`` returned."""
        self._flush()
        tokens = self.tokens
        result = apply()
        return (tokens if self.tokens is not tokens else Before(tokens, self.old)), result

    def steps(self) -> Iterator[Step]:
        """Evaluate every layer in order, yielding a Step after each."""
        softmax = self.model.attention == "softmax"
        shape = tuple(self.lengths)
        for k, block in enumerate(self.model.blocks):
            was = self.points
            before, _ = self._layer(lambda: self._ff(block.ff))
            was, exact = self.points, was and self.points
            yield Step(k, "ff", before, self.tokens, shape, sorted_before=self.index, exact=exact)
            if softmax:
                before, (attention, uniform, noises) = self._layer(lambda: self._sa_softmax(block.sa))
                yield Step(k, "sa", before, self.tokens, shape, attention, uniform, noise=noises,
                           below=self.below, exact=was and self.points)
            else:
                before, (attention, uniform) = self._layer(lambda: self._sa(block.sa))
                yield Step(k, "sa", before, self.tokens, shape, attention, uniform)
