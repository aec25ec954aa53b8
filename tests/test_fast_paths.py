"""The replay's shortcuts give what the defining formulas give (issue 8:
"both paths tested to agree"): the argmax by convex layers (rank-one and
rank-two scores, d = 2) against all n² scores, the sparse feed-forward layer
against the dense formula in Python Fractions, dict keys of vectors against
equality, a Step's view against copies, a snap's deduplicated rows, region
queries on a span basis against the piecewise-linear check, a Ranked order
against the exact order, a ranking on a direction read for its positive
multiples, and the float analysis's kept reach lists against fresh ones and
the per-token bound, its bounds shared per attention mean against per-token ones, and its score and attention-output bounds (their
per-sequence and per-mean parts taken once) against their definitions."""
from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest
import rational_float_analysis
from conftest import REPO
from flint import fmpq
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tfcert.verify import float_analysis
from tfcert.verify.evaluate import Replay
from tfcert.verify.layers import Scores, apply_ff, attention_of
from tfcert.verify.shortcuts import Projections, Ranked, Scaled, attention_table, direction_of
from tfcert.verify.floats import FORMATS, up
from tfcert.verify.formats import FF, LowRank, load_document, read_dataset, read_model
from tfcert.verify.numbers import dot, key

# small values with many zeros and ties: the cases where the shortcuts could differ
small = st.sampled_from([0, 0, 0, 1, -1, 2, -3, Fraction(1, 2), Fraction(-7, 3)])


def as_fmpq(x: int | Fraction) -> fmpq:
    return fmpq(Fraction(x).numerator, Fraction(x).denominator)


def vec(d: int):
    return st.lists(small, min_size=d, max_size=d).map(lambda v: tuple(map(as_fmpq, v)))


@st.composite
def rank_one_case(draw):
    d = draw(st.integers(1, 4))
    n = draw(st.integers(1, 8))
    return draw(vec(d)), draw(vec(d)), [draw(vec(d)) for _ in range(n)]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(rank_one_case())
def test_rank_one_argmax_equals_all_scores(case):
    u, v, X = case
    A = LowRank(fmpq(0), ((u, v),))
    table = Scores(A, X)
    assert attention_table(A, X) == [attention_of(table.row(i)) for i in range(len(X))]


@st.composite
def ff_case(draw):
    d = draw(st.integers(1, 4))
    width = draw(st.integers(1, 5))
    ff = FF(draw(st.sampled_from([fmpq(1), fmpq(0), fmpq(1, 2)])), tuple(draw(vec(d)) for _ in range(width)),
            draw(vec(width)), tuple(draw(vec(width)) for _ in range(d)))
    return ff, draw(vec(d))


def as_fraction(x: fmpq) -> Fraction:
    return Fraction(int(x.p), int(x.q))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(ff_case())
def test_sparse_feed_forward_equals_the_dense_formula(case):
    ff, x = case
    X = [as_fraction(v) for v in x]
    hidden = [max(Fraction(0), sum((as_fraction(u) * xi for u, xi in zip(row, X)), Fraction(0)) + as_fraction(b))
              for row, b in zip(ff.U, ff.b)]
    dense = [as_fraction(ff.eta) * xi + sum((as_fraction(w) * h for w, h in zip(row, hidden)), Fraction(0))
             for xi, row in zip(X, ff.W)]
    assert [as_fraction(v) for v in apply_ff(ff, x)] == dense


@st.composite
def grouped_ff_case(draw):
    """η = 1 and units that share U rows (as hats do), some groups cancelling beyond their
    last break (Σ W_j = 0, Σ W_j b_j = 0), and points on both sides of every break."""
    d = draw(st.integers(1, 3))
    rows = [draw(vec(d)) for _ in range(draw(st.integers(1, 3)))]
    U, b, columns = [], [], []
    for row in rows:
        k = draw(st.integers(1, 3))
        biases = [draw(st.fractions(-4, 4, max_denominator=4)) for _ in range(k)]
        weights = [draw(vec(d)) for _ in range(k)]
        if k == 2 and draw(st.booleans()) and biases[0] == biases[1]:
            weights[1] = tuple(-w for w in weights[0])  # a group that cancels everywhere but nowhere
        U += [row] * k
        b += [fmpq(int(v.numerator), int(v.denominator)) for v in biases]
        columns += weights
    W = tuple(tuple(col[i] for col in columns) for i in range(d))
    ff = FF(fmpq(1), tuple(U), tuple(b), W)
    return ff, [draw(vec(d)) for _ in range(6)]


@settings(max_examples=200, deadline=None)
@given(grouped_ff_case())
def test_ff_support_holds_every_token_the_formula_changes(case):
    """A token whose projection lies outside every support interval is unchanged by the
    formula; so the replay, which evaluates only the tokens inside, misses none."""
    from tfcert.verify.shortcuts import ff_support

    ff, points = case
    supports = ff_support(ff)
    for x in points:
        inside = any(sup.direction is None or (dot(sup.direction, x) > sup.lo
                                               and (sup.hi is None or dot(sup.direction, x) < sup.hi))
                     for sup in supports)
        if not inside:
            assert apply_ff(ff, x) == tuple(x)


@given(vec(3), vec(3))
def test_vector_keys_are_equal_exactly_when_the_vectors_are(a, b):
    assert (key(a) == key(b)) == (a == b)
    assert key(a) == key(tuple(fmpq(2 * v.p, 2 * v.q) for v in a))  # the same rationals, not in lowest terms


@st.composite
def planar_case(draw):
    """Scores that are dot products in the plane: d = 2 with any A (scale and
    0–2 terms), or A of rank two in d = 1…3; tokens on a small grid, so that
    duplicates, collinear keys and keys inside the hull all occur."""
    d = draw(st.sampled_from([2, 2, 1, 3]))
    scale = fmpq(draw(st.sampled_from([0, 1, -1, 2]))) if d == 2 else fmpq(0)
    count = draw(st.integers(0, 2)) if d == 2 else 2
    terms = tuple((draw(vec(d)), draw(vec(d))) for _ in range(count))
    n = draw(st.integers(1, 24))
    grid = st.lists(st.integers(-2, 2), min_size=d, max_size=d).map(lambda v: tuple(fmpq(x) for x in v))
    return LowRank(scale, terms), [draw(grid) for _ in range(n)]


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(planar_case())
def test_argmax_by_convex_layers_equals_all_scores(case):
    A, X = case
    table = Scores(A, X)
    assert attention_table(A, X) == [attention_of(table.row(i)) for i in range(len(X))]


@st.composite
def filtered_case(draw):
    """Scores filtered in binary64 first (shortcuts.FILTERED): d = 1 or 3…5, any A, a sequence
    longer than FILTERED whose tokens repeat (ties), differ below binary64's resolution
    (1 + 2^-80: equal floats, different scores) or in magnitude (2^±600, whose products
    underflow or overflow binary64; 2^-1100, below its normal range)."""
    d = draw(st.sampled_from([1, 3, 4, 5]))
    scale = fmpq(draw(st.sampled_from([0, 1, -1, 3])))
    terms = tuple((draw(vec(d)), draw(vec(d))) for _ in range(draw(st.integers(0 if scale else 1, 3))))
    grid = st.lists(st.sampled_from([0, 1, -1, 2, fmpq(1) + fmpq(2) ** -80, -fmpq(1) - fmpq(2) ** -80]),
                    min_size=d, max_size=d)
    n = draw(st.integers(33, 60))
    factor = draw(st.sampled_from([fmpq(1), fmpq(1), fmpq(2) ** 600, fmpq(2) ** -600, fmpq(2) ** -1100]))
    return LowRank(scale, terms), [tuple(fmpq(v) * factor for v in draw(grid)) for _ in range(n)]


@st.composite
def convex_planar_case(draw):
    """The planar table with more than FILTERED keys on its hull, where it filters their scores
    in binary64: d = 2, keys on a parabola (all on the hull), some inside, some repeated, some
    moved by 2^-80 (equal floats), all scaled by 1 or 2^±600."""
    A = LowRank(fmpq(draw(st.sampled_from([0, 1, -1]))), tuple((draw(vec(2)), draw(vec(2)))
                                                          for _ in range(draw(st.integers(0, 2)))))
    ks = draw(st.lists(st.integers(-40, 40), min_size=34, max_size=60, unique=True))
    nudge = st.sampled_from([fmpq(0), fmpq(0), fmpq(2) ** -80, -fmpq(2) ** -80])
    X = [(fmpq(k), fmpq(k * k) + draw(nudge)) for k in ks] + [(fmpq(0), fmpq(draw(st.integers(1, 400))))
                                                               for _ in range(draw(st.integers(0, 5)))]
    X += [draw(st.sampled_from(X)) for _ in range(draw(st.integers(0, 5)))]
    factor = draw(st.sampled_from([fmpq(1), fmpq(2) ** 600, fmpq(2) ** -600]))
    return A, [tuple(v * factor for v in x) for x in X]


@pytest.mark.slow
@settings(max_examples=350, deadline=None)
@given(st.one_of(filtered_case(), convex_planar_case()))
def test_argmax_by_a_binary64_filter_equals_all_scores(case):
    """Long sequences, in d ≠ 2 (the filter alone) and in the plane with every key on the hull."""
    A, X = case
    table = Scores(A, X)
    assert attention_table(A, X) == [attention_of(table.row(i)) for i in range(len(X))]


def test_a_binary64_filter_keeps_keys_whose_floats_tie():
    """Keys 1 and 1 + 2^-80 are one binary64 number; their exact scores differ, and so do
    the argmax and the runner-up's gap, which must come out exact."""
    from tfcert.verify.shortcuts import FILTERED

    eps = fmpq(2) ** -80
    X = [(fmpq(1), fmpq(0), fmpq(0))] * FILTERED + [(1 + eps, fmpq(0), fmpq(0)), (1 + 2 * eps, fmpq(0), fmpq(0))]
    A = LowRank(fmpq(1), ())
    att = attention_table(A, X)
    assert att[0].argmax == (FILTERED + 1,) and att[0].gap == eps
    table = Scores(A, X)
    assert att == [attention_of(table.row(i)) for i in range(len(X))]


@given(st.integers(1, 2**200), st.integers(0, 300), st.booleans())
def test_up_is_the_least_short_dyadic_above(num, k, dyadic):
    """up(q): the least number m·2^e ≥ q with m < 2^BOUND_BITS (q itself when short)."""
    from tfcert.verify.floats import BOUND_BITS
    q = Fraction(num, 2**k if dyadic else 2**k * 3 + 1)
    r = up(fmpq(q.numerator, q.denominator))
    value = Fraction(int(r.p), int(r.q))
    assert value >= q
    if value != q:  # otherwise q was short enough to keep: then it has at most 64 bits
        e = value.numerator.bit_length() - value.denominator.bit_length()  # ~log2(value)
        ulp = Fraction(2) ** (e - BOUND_BITS + 2)
        assert value - q < ulp  # rounded up by less than one unit of the BOUND_BITS-th bit


# rationals a float cannot tell apart (1 ± k·2^-80), beyond its range (±2^1100) and below it (2^-1100)
close = st.builds(lambda s, k, e: fmpq(s) * (fmpq(1) + fmpq(k, 2 ** 80)) * fmpq(2) ** e,
                  st.sampled_from([1, -1]), st.integers(-3, 3), st.sampled_from([0, 0, 1, 1100, -1100]))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(close, min_size=1, max_size=12), st.lists(st.tuples(st.integers(0, 11), close), max_size=12),
       close, close)
def test_ranked_answers_as_the_exact_order_does(values, moves, lo, hi):
    """Ranked sorts on a float in front of each rational: values that round
    to one float, or overflow it, must still come out in their exact order."""
    ranked, now = Ranked(list(values)), list(values)
    for g, v in moves:
        if g < len(now):
            ranked.move(g, v)
            now[g] = v
    assert [(v, g) for _, v, g in ranked.ordered] == sorted((v, g) for g, v in enumerate(now))
    assert ranked.inside(lo, hi) == [g for v, g in sorted((v, g) for g, v in enumerate(now)) if lo < v < hi]
    assert ranked.inside(lo, None) == [g for v, g in sorted((v, g) for g, v in enumerate(now)) if lo < v]
    if lo < hi:
        below, above = [v for v in now if v <= lo], [v for v in now if v >= hi]
        assert ranked.outside(lo, hi) == (max(below) if below else None, min(above) if above else None)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4).flatmap(lambda d: st.tuples(vec(d), st.lists(vec(d), min_size=1, max_size=10))),
       small, small)
def test_a_ranking_on_a_direction_answers_for_its_positive_multiples(case, lo, hi):
    """The replay keeps one ranking per direction r (direction_of: row = g·r,
    g > 0) and reads it for the row through Scaled: the same tokens inside
    any window, and the same nearest values outside it, as a ranking on the row."""
    row, tokens = case
    r, g = direction_of(row)
    scaled = Scaled(Projections(r, tokens), g) if g != 1 else Projections(r, tokens)
    direct = Projections(row, tokens)
    lo, hi = as_fmpq(lo), as_fmpq(hi)
    assert g > 0 and tuple(g * v for v in r) == row
    assert scaled.inside(lo, hi) == direct.inside(lo, hi) and scaled.inside(lo, None) == direct.inside(lo, None)
    if lo < hi:
        assert scaled.outside(lo, hi) == direct.outside(lo, hi)


@pytest.mark.parametrize("name", ["random-d20-wide", "demo-softmax", "equal-means-hardmax"])
def test_a_step_shows_tokens_and_sorted_projections_as_before_its_layer(name):
    """A Step is a view, not a copy: its tokens before the layer and the
    replay's sorted projections (moved only when the next layer starts) must
    equal a copy taken before the layer and a fresh sort of that copy."""
    folder = REPO / "certificates" / name
    model = read_model(load_document(folder / "model.json"))
    inputs = [p.input for p in read_dataset(load_document(folder / "dataset.json")).pairs]
    previous = [x for seq in inputs for x in seq]
    seen = 0
    for step in Replay(model, inputs).steps():
        assert list(step.flat_before) == previous
        for proj in (step.sorted_before or {}).values():
            fresh = sorted((dot(proj.direction, x), g) for g, x in enumerate(previous))
            assert [(v, g) for _, v, g in proj.ordered] == fresh
            assert step.projections(proj.direction) is proj
            seen += 1
        previous = list(step.flat_after)
    assert seen > 0


def test_a_snap_plateau_fails_for_a_change_in_any_one_row():
    """A snap's rows are asked of z3 as the basis of their span (one query for
    every snap of a construction); a change to any single row (or target
    coordinate) must still be caught."""
    import dataclasses
    import json

    from tfcert.verify.claims import snap
    from tfcert.verify.regions import lands_on

    def plateau_counterexample(ff, claim):
        return lands_on(ff, claim.units, claim.coordinate, claim.center, claim.radius, claim.to)

    folder = REPO / "certificates" / "random-d20-wide"
    model = read_model(load_document(folder / "model.json"))
    cert = json.loads((folder / "certificate.json").read_text())
    raw = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "snap")
    claim = snap.Claim(raw["block"], tuple(raw["units"]), raw["coordinate"], fmpq(raw["center"]),
                       fmpq(raw["radius"]), fmpq(raw["reach"]), frozenset(), tuple(fmpq(v) for v in raw["to"]))
    ff = model.blocks[claim.block].ff
    assert plateau_counterexample(ff, claim) is None
    for i in range(model.d):
        W = [list(r) for r in ff.W]
        j = next((j for j in claim.units if W[i][j] != 0), claim.units[0])
        W[i][j] = W[i][j] * fmpq(1001, 1000) + fmpq(1, 1000)
        bad = dataclasses.replace(ff, W=tuple(tuple(r) for r in W))
        assert plateau_counterexample(bad, claim) is not None, i
        to = list(claim.to)
        to[i] += fmpq(1, 1000)
        assert plateau_counterexample(ff, dataclasses.replace(claim, to=tuple(to))) is not None, i


# ---------------------------------------------------------------- region queries on a span basis

def _block(ff: FF) -> dict:
    """The group's layer as tfcert/selftest/oracle.py reads one (Fractions), for its exact checks."""
    return {"eta": as_fraction(ff.eta), "W": [[as_fraction(w) for w in row] for row in ff.W],
            "b": [as_fraction(v) for v in ff.b]}


@st.composite
def group_case(draw):
    """A 4-unit group with breakpoints lo < p < q < hi (a hat or snap shape) and
    rows drawn from the rows that vanish outside (lo, hi), sometimes nudged."""
    d = draw(st.integers(1, 3))
    lo = draw(st.integers(-3, 3))
    steps = [draw(st.sampled_from([1, 2, Fraction(1, 2), 3])) for _ in range(3)]
    points = [Fraction(lo) + sum(steps[:i], Fraction(0)) for i in range(4)]
    # rows with Σ w = 0 and Σ w·p = 0 vanish on both rays: two free coefficients each
    rows = []
    for _ in range(d):
        a, c = draw(small), draw(small)
        w0, w1 = Fraction(a), Fraction(c)
        # solve w2, w3 from w2 + w3 = −w0 − w1 and w2 p2 + w3 p3 = −w0 p0 − w1 p1
        s, m = -w0 - w1, -w0 * points[0] - w1 * points[1]
        w3 = (m - s * points[2]) / (points[3] - points[2])
        rows.append([w0, w1, s - w3, w3])
    if draw(st.booleans()):  # nudge one entry: the group may now be non-zero outside
        i, j = draw(st.integers(0, d - 1)), draw(st.integers(0, 3))
        rows[i][j] += draw(st.sampled_from([1, Fraction(1, 3), -2]))
    W = tuple(tuple(map(as_fmpq, r)) for r in rows)
    b = tuple(fmpq(-p.numerator, p.denominator) for p in points)
    return FF(fmpq(1), tuple((fmpq(1),) for _ in range(4)), b, W), points


@settings(max_examples=150, deadline=None)
@given(group_case())
def test_zero_outside_on_a_span_basis_matches_the_piecewise_linear_check(case):
    """zero_outside asks z3 about the reduced echelon basis of the rows'
    span; its verdict must be the exact check of every row on both rays."""
    from tfcert.verify.regions import zero_outside
    ff, points = case
    units = (0, 1, 2, 3)
    lo, hi = fmpq(points[0].numerator, points[0].denominator), fmpq(points[-1].numerator, points[-1].denominator)
    from tfcert.selftest.oracle import zero_on
    blk = _block(ff)
    truth = zero_on(blk, units, None, points[0]) and zero_on(blk, units, points[-1], None)
    assert (zero_outside(ff, units, lo, hi) is None) == truth


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(group_case(), st.integers(0, 2), st.sampled_from([0, 1, Fraction(-1, 2)]), st.sampled_from([1, 1, 0, 2]))
def test_lands_on_a_span_basis_matches_the_plateau_ends(case, k, drift, eta):
    """lands_on: η·t·e_k + group(t) = to on [c − r, c + r]; with no breakpoint
    strictly inside, the map is affine there and its two ends decide."""
    import dataclasses

    from tfcert.verify.regions import lands_on
    ff, points = case
    ff = dataclasses.replace(ff, eta=fmpq(eta))
    d = len(ff.W)
    k = min(k, d - 1)
    c, r = (points[1] + points[2]) / 2, (points[2] - points[1]) / 2
    from tfcert.selftest.oracle import group
    at = [tuple(eta * t * (i == k) + g for i, g in enumerate(group(_block(ff), (0, 1, 2, 3), t))) for t in (c - r, c + r)]
    to = tuple(v + (drift if i == 0 else 0) for i, v in enumerate(at[0]))  # the left end's value, maybe moved
    truth = at[0] == to and at[1] == to
    q = [as_fmpq(x) for x in (c, r, *to)]
    assert (lands_on(ff, (0, 1, 2, 3), k, q[0], q[1], tuple(q[2:])) is None) == truth


# ---------------------------------------------------------------- the float analysis's reach lists

@pytest.mark.parametrize("name", ["random-d20-wide", "one-sequence-d8", "equal-means-hardmax", "demo-hardmax",
                                  "demo-softmax"])
def test_the_float_reach_kept_as_tokens_change_equals_a_fresh_one(name, monkeypatch):
    """At every FF layer the tokens ranked by their slack, kept up to date as
    the analysis widens tokens, must give the reach that lists built afresh
    from the current tokens and errors give; and that reach must hold every
    token one of whose writing units is not off by its own error bound (the
    classification _ff_token makes), over the whole of an enclosure too
    (softmax: the snaps after the collapse)."""
    from tfcert.verify.check import verify_files
    from tfcert.verify.enclose import projection_range

    kept = float_analysis.Analysis._ff_reach
    seen = []

    def both(self, before, U, b, W, eta):
        todo = kept(self, before, U, b, W, eta)
        lists, self.reach = self.reach, {}
        fresh = kept(self, before, U, b, W, eta)
        self.reach = lists
        assert todo == fresh
        reached = set(todo)
        for g, x in enumerate(before):
            if g in reached:
                continue
            for k, row in enumerate(U):
                if any(w.exact[k] or w.hat[k] for w in W):
                    c = sum(1 for h in row.hat if h) + (b.hat[k] != 0)
                    fa = float_analysis
                    err = fa.add(row.absdot("exact", self.err[g]), row.absdot("delta", self.mag[g]), b.abs("delta", k),
                                 fa.mul(self.c.gamma(max(c, 1)), fa.add(row.absdot("hat", self.mag[g]), b.abs("hat", k))),
                                 fa.mul(c, self.c.tiny))
                    hi = projection_range(x, row.exact, None)[1] + b.exact[k]
                    assert hi + fa.rational(err) <= 0, (g, k)
        seen.append(len(todo) < len(before))
        return todo

    monkeypatch.setattr(float_analysis.Analysis, "_ff_reach", both)
    folder = REPO / "certificates" / name
    assert verify_files(folder / "model.json", folder / "dataset.json", folder / "certificate.json").ok
    assert any(seen)  # some layer left tokens out


@pytest.mark.parametrize("name", ["random-d20-wide", "equal-means-hardmax", "one-sequence-d8", "demo-softmax"])
def test_float_bounds_shared_per_attention_mean_equal_per_token_ones(name, monkeypatch):
    """An attention layer's float analysis takes each distinct mean's part of
    the output bound once, and with ρ = 0 a token's whole bound is its
    mean's: it must reach, layer by layer, the bounds it reaches when every
    token counts as having a mean of its own (``id`` made unique per call,
    so nothing is shared) — and the score bound taken once per sequence is
    exercised on the way (hardmax and softmax bundles)."""
    from itertools import count

    folder = REPO / "certificates" / name
    model = read_model(load_document(folder / "model.json"))
    inputs = [p.input for p in read_dataset(load_document(folder / "dataset.json")).pairs]

    def states() -> tuple[list, str | None]:
        analysis, seen = float_analysis.Analysis(model, inputs, FORMATS["binary64"]), []
        for step in Replay(model, inputs).steps():
            analysis.step(step)
            seen.append(list(analysis.err))
        return seen, analysis.failure

    shared = states()
    fresh = count()
    monkeypatch.setattr(float_analysis, "id", lambda obj: next(fresh), raising=False)
    assert states() == shared
    assert next(fresh) > 0  # the per-token run did go through the cache keys


@st.composite
def score_case(draw):
    d, r = draw(st.integers(1, 3)), draw(st.integers(0, 2))
    scalar = st.sampled_from([0, 0, 1, -3, Fraction(1, 3), Fraction(-2, 7), Fraction(1, 10)])
    vector = st.lists(scalar, min_size=d, max_size=d).map(lambda v: tuple(map(as_fmpq, v)))
    A = LowRank(as_fmpq(draw(scalar)), tuple((draw(vector), draw(vector)) for _ in range(r)))
    mi, ei, xi, M, E = (tuple(abs(x) for x in draw(vector)) for _ in range(5))
    return d, A, mi, ei, xi, tuple(map(max, M, mi)), tuple(map(max, E, ei))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(score_case())
def test_the_score_error_taken_per_sequence_equals_its_defining_bound(case):
    """The attention-score error bound, with the sequence's side (|u|·M and
    the like) taken once, against its definition: B(e_i, M) + B(|x_i|, E) +
    B_δ(m_i, M) + γ·B̂(m_i, M) + the underflow terms, B the bilinear bound
    |scale|·a·b + Σ (|v|·a)(|u|·b) and B_δ the one of the rounding changes."""
    d, A, mi, ei, xi, M, E = case
    fmt = FORMATS["binary32"]
    m = rational_float_analysis.matrix(A, fmt)
    r = len(m.terms)
    B_delta = (m.scale.delta[0] * dot(mi, M)
               + sum((v.absdot("delta", mi) * u.absdot("hat", M) + v.absdot("exact", mi) * u.absdot("delta", M)
                      for u, v in m.terms), fmpq(0)))
    lowrank = sum((u.absdot("hat", M) + v.absdot("hat", mi) for u, v in m.terms), fmpq(0))
    smi, sM = sum(mi, fmpq(0)), sum(M, fmpq(0))
    underflow = ((r + 1) * smi * sM + (d + r + 1) * (smi + sM) + d * (lowrank + abs(m.scale.hat[0]))
                 + d * d + d + r * (2 * d + 1) + 1)
    defined = (m.bilinear(ei, M) + m.bilinear(xi, E) + B_delta + fmt.gamma(2 * m.reach(d) + r + 2) * m.bilinear(mi, M, "hat")
               + underflow * fmt.tiny)
    error = rational_float_analysis.Analysis._score_error(SimpleNamespace(d=d, fmt=fmt), m, M, E)
    assert error(mi, ei, xi) == defined


@settings(max_examples=200, deadline=None)
@given(score_case(), st.sampled_from([0, 1, Fraction(1, 3), -2]))
@example((2, LowRank(fmpq(0), (((fmpq(0), fmpq(1)), (fmpq(4), fmpq(0))),)), (fmpq(3), fmpq(1)), (fmpq(1, 8), fmpq(0)),
          (fmpq(1, 16), fmpq(0)), (fmpq(5), fmpq(1)), (fmpq(1, 8), fmpq(0))), 0)  # a scaled copy: V̂ m̂ exact
@example((2, LowRank(fmpq(0), (((fmpq(0), fmpq(1)), (fmpq(3), fmpq(0))),)), (fmpq(3), fmpq(1)), (fmpq(1, 8), fmpq(0)),
          (fmpq(1, 16), fmpq(0)), (fmpq(5), fmpq(1)), (fmpq(1, 8), fmpq(0))), 0)  # not one (3): V̂ m̂ rounds
def test_the_attention_output_bound_taken_per_mean_equals_its_defining_bound(case, rho):
    """A token's attention-output bound, its mean's part taken once, against
    its definition: |ρ|e + δρ·|x| + |V|·e_m + δV·|m| + γ(|ρ̂||x| + |V̂|·|m|)
    + underflow, per coordinate not copied exactly; V̂'s own γ and underflow terms
    dropped where ρ̂ = 0 and V̂ is a scaled copy (its product exact)."""
    d, V, mag, e, em, mm, _ = case
    fmt = FORMATS["binary32"]
    m, r = rational_float_analysis.matrix(V, fmt), rational_float_analysis.Rounded((as_fmpq(rho),), fmt)
    copied = [c % 2 == 1 and m.zero_row(c) for c in range(d)]
    g = fmt.gamma(m.reach(d) + len(m.terms) + 3)
    underflow = (len(m.terms) + 1) * sum(mm, fmpq(0)) + d + 2 * len(m.terms) + 2
    applied, dv, hat = m.apply_abs(em), m.apply_delta(mm), m.apply_abs(mm, "hat")
    product = 0 if r.hat[0] == 0 and m.scaled_copy else 1  # V̂'s product rounds (1) or is exact (0)
    defined = tuple((e[c] if r.hat[0] == 1 else fmpq(0)) if copied[c] else
                    up(abs(r.exact[0]) * e[c] + r.delta[0] * mag[c] + applied[c] + dv[c]
                       + g * (abs(r.hat[0]) * mag[c] + product * hat[c])
                       + product * (underflow + d * sum((abs(u.hat[c]) for u, _ in m.terms), fmpq(0))) * fmt.tiny)
                    for c in range(d))
    analysis = SimpleNamespace(d=d, fmt=fmt, _check_range=lambda value, what: None)
    analysis._exact_product = lambda *args: rational_float_analysis.Analysis._exact_product(analysis, *args)
    assert rational_float_analysis.Analysis._sa_out(analysis, (em, mm), r, m, copied)(mag, e) == defined
