"""Construct → verify on random datasets of every shape the assumptions allow,
checked against an independent dense forward pass."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from conftest import REPO, dataset_json, datasets, write_json
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from fractions import Fraction
from flint import fmpq
from naive import forward, q

from tfcert.construct.build import construct
from tfcert.construct.bundle import build
from tfcert.cli.main import main
from tfcert.construct.hats import identity_sa
from tfcert.verify.claims.size import measure
from tfcert.verify.formats import load_document, read_dataset


def check_bundle(ds: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_json(Path(tmp) / "ds.json", ds)
        bundle = build(path)
        assert bundle.report.ok
        model = json.loads(bundle.files["model.json"])
        outputs = forward(model, [p["input"] for p in ds["pairs"]])
        for out, pair in zip(outputs, ds["pairs"]):
            assert out == {tuple(q(v) for v in y) for y in pair["output"]}
        size = measure(bundle.construction.model, bundle.dataset, "1.6")
        assert size["blocks"] <= size["bounds"]["blocks"]
        assert size["width"] <= 4 and size["parameters"] <= size["bounds"]["parameters"]
        n_seq, sum_m = len(ds["pairs"]), sum(len(p["output"]) for p in ds["pairs"])
        bumps = sum(c["kind"] == "hat" for c in bundle.construction.phases[0].claims)
        assert bumps <= n_seq - 1
        assert len(bundle.construction.phases[0].blocks) == (bumps + 1 if bumps else 0)  # the projection's block too
        # d ≥ 3 hardmax adds the interval block and one block per sequence with leftovers, but one
        # block fewer than the sequences in all: L ≤ 2Σm + 1 + bumps + N ≤ 2Σm + 2N (Theorem 1.6)
        extra = size["blocks"] - (2 * sum_m + 1 + bumps)
        assert 0 <= extra <= (n_seq if ds["d"] >= 3 and n_seq > 1 else 0)
        out = Path(tmp) / "bundle"
        (out).mkdir()
        for name, data in bundle.files.items():
            (out / name).write_bytes(data)
        assert main(["verify", "--model", str(out / "model.json"), "--dataset", str(out / "dataset.json"),
                     "--certificate", str(out / "certificate.json"), "--json"]) == 0


EQUAL_MEANS = dataset_json(2, [
    ([(0, 0), (2, 0)], [(5, 5)]),
    ([(0, 0), (2, 0), (1, 0)], [(1, 1), (2, 2)]),  # same mean (1, 0), shares two tokens
    ([(2, 0), (0, 0), (1, 1), (1, -1)], [(3, 3)]),  # same mean again
    ([(1, 1), (1, -1)], [(0, 1), (1, 0)]),  # same mean, shares with the third
])


@pytest.mark.slow
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(datasets())
@example(EQUAL_MEANS)
def test_construct_verifies_and_interpolates(ds):
    check_bundle(ds)


def test_bumps_separate_equal_means_with_shared_tokens():
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build(write_json(Path(tmp) / "ds.json", EQUAL_MEANS))
    assert 1 <= sum(c["kind"] == "hat" for c in bundle.construction.phases[0].claims) <= 3


@pytest.mark.slow
def test_extreme_shapes():
    """d = 24 with 30 sequences of length 20 (m = 1), and 2 sequences with m = n = 20."""
    wide = [([(j % 3, i) + tuple((7 * j + 3 * i + k * k) % 11 - 5 for k in range(22)) for i in range(20)],
             [tuple((j + k) % 3 for k in range(24))]) for j in range(30)]
    check_bundle(dataset_json(24, wide))
    full = [([(i, j, i * j) for i in range(20)], [(i + j, 0, -i) for i in range(20)]) for j in range(2)]
    check_bundle(dataset_json(3, full))


@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
@pytest.mark.parametrize("example", ["demo.json", "equal-means.json"])
def test_phases_chain(example, attention):
    """Each phase's blocks sit at its span, one after another, and make the model; a phase with
    no blocks of its own speaks about the block before: the collapse about the leader phase's
    last block, whose attention is the collapse's (not the identity), and, after bumps, the
    separation about the bump phase's last one, whose attention is the mean shift; the collapse
    hands on the model's temperature; the last phase's tokens are the targets."""
    dataset = read_dataset(load_document(REPO / "tfcert" / "examples" / example))
    construction = construct(dataset, attention)
    phases = {p.name: p for p in construction.phases}
    at = 0
    for p in construction.phases:
        if p.blocks or p.span == (at, at):
            assert p.span == (at, at + len(p.blocks))
            at += len(p.blocks)
        else:
            assert p.span == (at - 1, at)
    assert sum((p.blocks for p in construction.phases), ()) == construction.model.blocks
    bump, sep = phases["bump"], phases["separation"]
    assert (example == "equal-means.json") == bool(bump.blocks) == (sep.blocks == ())
    if bump.blocks:
        assert bump.blocks[-1].sa != identity_sa() and all(b.sa == identity_sa() for b in bump.blocks[:-1])
    lead, coll = phases["leaders"], phases["collapse"]
    assert coll.blocks == () and coll.span == (lead.span[1] - 1, lead.span[1])
    assert lead.blocks[-1].sa != identity_sa() and all(b.sa == identity_sa() for b in lead.blocks[:-1])
    assert (coll.temperature is not None) == (attention == "softmax") == any(
        c["kind"] == "tau_star" for c in coll.claims)
    assert coll.temperature == construction.model.temperature
    for tokens, pair in zip(phases["interpolation"].tokens, dataset.pairs):
        assert set(tokens) == set(pair.output)


@given(st.lists(st.fractions(min_value=2, max_value=2 ** 40), min_size=1, max_size=6, unique=True),
       st.fractions(min_value=-2 ** 30, max_value=1))
def test_snap_breakpoints_are_exact_in_binary32_and_stay_above_every_target(raw, top):
    """Positive codes at least 1 apart above top + 3/2, as the leader phase places them: the snaps'
    radii are powers of two (r = R'/2) within half the least gap and 1 above every target, and
    their centres multiples of a power of two fine enough for the codes' magnitude, so every
    breakpoint is a binary32 number, whatever the codes' size."""
    from tfcert.construct.snap import Snap, centre_step, radii
    from tfcert.construct.hats import dyadic_near
    from tfcert.verify.floats import FORMATS, round_nearest

    codes = sorted({max(top, 0) + Fraction(3, 2) + 1 + k + x for k, x in enumerate(sorted(raw))})  # positive
    codes = [fmpq(c.numerator, c.denominator) for c in codes]
    top = fmpq(top.numerator, top.denominator)
    r, reach = radii(codes, top)
    assert reach >= fmpq(1, 2) and r == reach / 2 and (reach.p == 1 or reach.q == 1)
    step = centre_step(max(codes) + reach, r)
    for c in codes:
        snap = Snap(dyadic_near(c, step), r, reach, (), ())
        points = snap.breakpoints
        assert points[0] > top + 1 - step and c - step <= snap.center <= c
        if max(codes) + reach < 2 ** 24 * step:  # a grid fine enough for binary32 at radius/8
            assert all(round_nearest(p, FORMATS["binary32"]) == p for p in points)
    gaps = [b - a for a, b in zip(codes, codes[1:])]
    assert not gaps or r + reach <= min(gaps)


@given(st.integers(2 ** 10, 2 ** 11 - 1), st.integers(-20, 14), st.integers(0, 2 ** 20), st.integers(24, 160))
def test_a_spaced_hat_is_exact_in_binary16_and_keeps_its_value_and_neighbours_apart(m, e, frac, sixteenths):
    """A value in any binade from 2^-20 up and a gap of 1.5 to 10 of binary16's spacings s there
    (2^-24 below 2^-14): where spaced_hat gives a hat, every breakpoint is a binary16 number, its
    plateau holds the value with s/2 to spare and its window keeps s from any token at the gap's
    distance; in the normal range it gives one wherever the gap is at least 3.5 s (the window
    then fits: plateau s, ramps s, half a spacing of centring)."""
    from tfcert.construct.hats import spaced_hat
    from tfcert.verify.floats import FORMATS, round_nearest

    s = fmpq(2) ** (e - 10)  # binary16's spacing in the binade [2^e, 2^(e+1))
    value = (m + fmpq(frac, 2 ** 20)) * s  # in [2^e, 2^(e+1)), any fraction of a spacing
    gap = s * fmpq(sixteenths, 16)
    assume(gap <= 1 and value + gap < fmpq(2) ** (e + 1))  # flat_hat's gap; neighbours in the same binade
    unit = (fmpq(1), fmpq(0))
    hat = spaced_hat(unit, value, gap, s / 64, unit, ((0, 0),), unit, None)
    if gap >= fmpq(7, 2) * s and e >= -14:
        assert hat is not None
    if hat is None:
        return
    assert hat.eps == s and hat.flat >= s
    assert all(round_nearest(p, FORMATS["binary16"]) == p for p, _ in hat.units())
    assert hat.p - hat.flat + s / 2 <= value <= hat.p + hat.flat - s / 2
    lo, hi = hat.window
    assert value - gap + s <= lo and hi <= value + gap - s


@st.composite
def hats(draw):
    """A hat as the leader phase (w = ±2^k e_i, flat, ``above``) or a bump (w dense, three units)
    builds one, with slopes from 1 to 2^40 and breakpoints from 2^-35 to 2^35."""
    from tfcert.construct.hats import Hat

    d = draw(st.integers(2, 4))
    if draw(st.booleans()):
        i = draw(st.integers(0, d - 1))
        w = tuple(draw(st.sampled_from([-1, 1])) * fmpq(2) ** draw(st.integers(-3, 3)) if j == i else fmpq(0)
                  for j in range(d))
    else:
        w = tuple(fmpq(draw(st.integers(-2 ** 20, 2 ** 20)), 2 ** 20) for _ in range(d))
    assume(any(w))
    eps = fmpq(1, 2 ** draw(st.integers(0, 36)))
    flat = eps * draw(st.integers(0, 8))
    p = draw(st.integers(-2 ** 30, 2 ** 30)) * fmpq(2) ** -draw(st.integers(-5, 35))
    delta = tuple(fmpq(draw(st.integers(-64, 64)), draw(st.integers(1, 8))) for _ in range(d))
    assume(any(delta))
    above = (tuple(fmpq(draw(st.integers(-64, 64)), 64) for _ in range(d))
             if flat and draw(st.booleans()) else None)
    return Hat(w, p, eps, delta, ((0, 0),), delta, flat=flat, above=above)


@settings(max_examples=60, deadline=None)
@given(hats(), st.lists(st.integers(-6, 6), min_size=1, max_size=8), st.integers(-3, 3))
def test_a_hat_layer_is_the_unscaled_map_with_balanced_numbers(hat, offsets, shift):
    """The stored units are the hat's scaled by its gain g (a power of two): the layer is
    exactly x + Σ col_k·relu(w·x − p_k), the unscaled map (relu is positively homogeneous), at
    every breakpoint and around it; the claim's window on the stored row g·w still bounds where
    the group acts (z3, as the verifier asks); and the largest U or bias entry and the largest
    W entry are within a factor 4, so each is below 2·sqrt(their product, the unscaled one's):
    a hat whose U and W ranges multiply to at most 32752² fits binary16 (largest 65504)."""
    from tfcert.construct.hats import hat_claims, hat_ff
    from tfcert.verify.floats import FORMATS, round_nearest
    from tfcert.verify.layers import apply_ff, relu
    from tfcert.verify.numbers import add, dot, scale
    from tfcert.verify.regions import ramps_to, zero_outside

    d, g = len(hat.w), hat.gain
    assert g > 0 and (g.p == 1 or g.q == 1) and not int(g.p * g.q) & int(g.p * g.q - 1)  # a power of two
    ff = hat_ff([hat], d)
    units, cols = hat.units(), hat.columns()
    base = tuple(fmpq(shift + j, 3) for j in range(d))
    for p, _ in units:
        for k in offsets:
            t = p + k * hat.eps / 4  # w·x = t: x = base moved along w
            x = add(base, scale((t - dot(hat.w, base)) / dot(hat.w, hat.w), hat.w))
            unscaled = x
            for (p_k, _), col in zip(units, cols):
                unscaled = add(unscaled, scale(relu(dot(hat.w, x) - p_k), col))
            assert apply_ff(ff, x) == unscaled
    claim = hat_claims([hat], 0, [None])[0]
    lo, hi = (fmpq(*map(int, (v.split("/") + ["1"])[:2])) for v in claim["window"])
    assert (lo, hi) == (g * hat.window[0], g * hat.window[1])
    members = tuple(range(len(units)))
    assert (zero_outside(ff, members, lo, hi) if hat.above is None else ramps_to(ff, members, lo, hi, hat.above)) is None
    inner = max(abs(v) for v in (*(x for row in ff.U for x in row), *ff.b))
    outer = max(abs(v) for row in ff.W for v in row)
    assert inner <= outer < 4 * inner
    unscaled_inner = max(*map(abs, hat.w), *(abs(q) for q, _ in units))
    assert inner * outer == unscaled_inner * max(abs(v) for col in cols for v in col)
    if inner * outer <= 32752 ** 2:
        for v in (*(x for row in ff.U for x in row), *ff.b, *(x for row in ff.W for x in row)):
            round_nearest(v, FORMATS["binary16"])  # no OverflowError


@settings(max_examples=200, deadline=None)
@given(st.fractions(-10 ** 4, 10 ** 4, max_denominator=8), st.integers(1, 300))
def test_softmax_codes_sit_low_with_the_snaps_support_of_the_hardmax_codes(top, count):
    """leaders.choose_codes: under softmax the codes C + kS start at the least multiple of S that
    leaves the snaps the support R' (leaders.radii) of the hardmax codes G + kS — never higher than G,
    every code above every target's coordinate 2 plus 3/2, and as few significant bits (C + kS
    a multiple of S below 2^(b+1)·S), so the collapse's rounding, relative to the code, is smaller
    and the snaps are as wide. Lifted codes start at G. Under hardmax the codes start at G but
    where only the low ones put every snap breakpoint c ± R'/2, c ± R' in bfloat16 (r = R'/2)."""
    from tfcert.construct.leaders import choose_codes, in_bfloat16, radii, snap_points
    from tfcert.verify.formats import parse_document

    ds = read_dataset(parse_document("ds.json", json.dumps(dataset_json(4, [([(0, 0, 0, 0)], [(0, top, 0, 0)])])).encode()))
    g, first, spacing = choose_codes(ds, count, softmax=True)
    assert choose_codes(ds, count, softmax=True, lifted_codes=True) == (g, g, spacing)
    hard = [g + k * spacing for k in range(count)]
    soft = [first + k * spacing for k in range(count)]
    top = fmpq(top.numerator, top.denominator)
    assert first <= g and first >= top + fmpq(3, 2) and (first / spacing).q == 1
    assert radii(soft, top) == radii(hard, top)
    bits = max(count - 1, 1).bit_length()
    assert max(soft) < 2 ** (bits + 1) * spacing
    only_low = not in_bfloat16(snap_points(hard, *radii(hard, top))) and in_bfloat16(snap_points(soft, *radii(soft, top)))
    assert choose_codes(ds, count) == (g, first if only_low else g, spacing)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 16), st.lists(st.lists(st.integers(-5, 5), min_size=16, max_size=16), min_size=1, max_size=40))
@example(2, [[a, b] + [0] * 14 for a in range(-2, 3) for b in range(-2, 3)])
def test_a_fitted_direction_is_computed_exactly_by_every_bfloat16_run(d, rows):
    """Whatever direction the local search for bfloat16-exact projections returns tells every
    distinct token apart, and a bfloat16 run computes every t = α·w·x + β exactly: every term a
    number of the format and the sum exact by the exact evaluation lemma with each term's sign
    (the inputs are known), token by token."""
    from tfcert.construct.separation import _fitted, _scaling
    from tfcert.verify.floats import FORMATS, exact_sum, round_nearest, valuation

    tokens = list(dict.fromkeys(tuple(fmpq(v) for v in row[:d]) for row in rows))
    found = _fitted(tokens, d)
    if not found:
        return
    (w,) = found
    projections = [sum((a * b for a, b in zip(w, x)), fmpq(0)) for x in tokens]
    assert len(set(projections)) == len(tokens)
    alpha, beta = _scaling(projections, power=True)
    fmt = FORMATS["bfloat16"]
    for x in tokens:
        terms = [alpha * a * v for a, v in zip(w, x) if a * v] + [beta]
        assert all(round_nearest(t, fmt) == t for t in terms)
        assert exact_sum([(valuation(t), abs(t), (t > 0) - (t < 0)) for t in terms], fmt) is not None


def test_the_fitted_search_finds_survey_seed_136s_direction():
    """26 integer tokens in d = 64 (survey seed 136), where none of _searched's 256 random draws is
    bfloat16-exact: the local search finds one."""
    import float_survey
    from tfcert.construct.separation import _fitted

    _, doc = float_survey.dataset(136)
    tokens = [tuple(fmpq(int(v)) for v in x) for p in doc["pairs"] for x in p["input"]]
    assert _fitted(tokens, doc["d"])


@pytest.mark.slow  # about 5 s
def test_mean_shifts_past_the_first_small_rationals_are_ranked(tmp_path):
    """235 collinear integer tokens in 59 sequences (float_survey.dataset(566), beyond the survey's
    200): t + λ·t̄_j is one scalar line whatever the direction, and every λ of the first chunk makes
    two shifted values meet. Ranking the next chunks finds an axis with λ = 9/7 and a binary32
    claim of 0; with one chunk, construct falls back to an unranked direction and binary32 has no
    claim (separation.shift_chunks)."""
    import float_survey
    from tfcert.construct import separation

    _, doc = float_survey.dataset(566)
    path = write_json(tmp_path / "ds.json", doc)
    bundle = build(path, "hardmax")
    claims = dict((name, bound) for name, bound, _ in bundle.floats)
    assert claims["binary32"] == 0
    (sep,) = [p for p in bundle.construction.phases if p.name == "separation"]
    (shift,) = bundle.construction.model.blocks[sep.span[0]].sa.V.terms  # V = λ·e_t e_tᵀ
    assert shift[0][0] == fmpq(9, 7)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(separation, "CHUNKS", 1)
        assert dict((name, bound) for name, bound, _ in build(path, "hardmax").floats)["binary32"] is None


@pytest.mark.parametrize("seed", [5, 80])
def test_short_walks_from_pairs_of_coordinates_find_what_the_long_walk_does_not(seed):
    """Survey seeds 5 and 80: 49 and 45 integer tokens in [-5, 5]^16 and [-5, 5]^64, which a
    bfloat16-exact t must put apart into at most 128 values. The walk from the widest axis finds
    no direction within its 1500 moves (it needs about 20 000 and 90 000); the short walks from
    the pairs of coordinates that alone tell the most tokens apart do."""
    import float_survey
    from tfcert.construct import separation

    _, doc = float_survey.dataset(seed)
    tokens = [tuple(fmpq(int(v)) for v in x) for p in doc["pairs"] for x in p["input"]]
    separation._search.cache_clear()  # a search of these tokens with the pairs may be cached
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(separation, "PAIRS", 0)
        assert separation._fitted(tokens, doc["d"]) == []
    separation._search.cache_clear()
    (w,) = separation._fitted(tokens, doc["d"])
    assert len({sum((a * b for a, b in zip(w, x)), fmpq(0)) for x in tokens}) == len(set(tokens))


def test_a_projection_is_exact_where_the_coordinates_it_weighs_are():
    """separation._exact_projection reads only the coordinates the row weighs: a third in a
    coordinate of weight 0 does not make t inexact (0·x̂ = 0), one in a weighed coordinate does."""
    from tfcert.construct.separation import _exact_projection

    tokens = [(fmpq(1, 3), fmpq(3), fmpq(-2)), (fmpq(4, 3), fmpq(-1), fmpq(5))]
    beta = fmpq(1, 64)
    assert _exact_projection((fmpq(0), fmpq(1, 256), fmpq(1, 128)), beta, tokens)
    assert not _exact_projection((fmpq(1, 256), fmpq(1, 256), fmpq(1, 128)), beta, tokens)


def test_the_fitted_search_declines_values_beyond_float64_and_int64():
    """Dyadic values of one significant bit but beyond float64 (2^2000), or whose grid beyond int64
    (2^70 beside 2^-70): no bfloat16 number either, so no direction, and no error."""
    from tfcert.construct.separation import _fitted

    two = fmpq(2)
    assert _fitted([(two ** 2000, fmpq(1)), (fmpq(3), two ** 2000)], 2) == []
    assert _fitted([(two ** 70, fmpq(1)), (fmpq(3), two ** -70)], 2) == []


def test_the_room_of_a_shift_is_read_around_leaders_only():
    """separation._room: the least gap next to a leader, less both ends' errors, in binary16
    spacings at the largest value — two other tokens may lie as close as they like (no hat has a
    window there), and a leader's error counts against its room."""
    import numpy as np
    from tfcert.construct.separation import _room

    s = np.array([[1.0], [1.5], [1.5 + 2 ** -12], [3.0]])  # 3.0: binary16 spacing 2^-9
    lead = np.array([[True], [False], [False], [True]])
    e = np.zeros_like(s)
    assert _room(s, e, lead)[0] == 0.5 * 512  # 1.0 to 1.5; 1.5 and 1.5 + 2^-12 are no leader's neighbours
    lead[1] = True
    assert _room(s, e, lead)[0] == 2 ** -12 * 512
    lead[1] = False
    e[0] = 0.25
    assert _room(s, e, lead)[0] == 0.25 * 512


@pytest.mark.slow  # about 2 s
def test_a_half_precision_dataset_with_shared_tokens_gets_an_exact_t_and_a_spaced_shift():
    """Survey seed 164 (16 tokens, some shared by two sequences): the first model has no binary16
    claim, so construct builds again preferring, among the directions whose t binary16 computes
    exactly, a mean shift that leaves every leader five binary16 spacings from its neighbours
    after their errors (bundle._respaced): that model is kept (a binary16-exact first layer,
    λ ≠ 0), and its hardmax binary16 claim is 0 (the first model's best-ranked pair rounded t)."""
    import float_survey
    from tfcert.verify.floats import FORMATS, round_nearest

    _, doc = float_survey.dataset(164)
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build(write_json(Path(tmp) / "ds.json", doc), "hardmax")
    sep = next(p for p in bundle.construction.phases if p.name in ("bump", "separation") and p.blocks).blocks[0]
    assert any(sep.ff.U[0]) and all(round_nearest(v, FORMATS["binary16"]) == v for v in (*sep.ff.U[0], sep.ff.b[0]))
    assert any(v for u, _ in sep.sa.V.terms for v in u)  # λ ≠ 0
    cert = json.loads(bundle.files["certificate.json"])
    claims = {c["format"]: c["bound"] for c in cert["phases"][-1]["claims"] if c["kind"] == "float"}
    assert claims.get("binary16") == "0"


@pytest.mark.slow  # about 2 s
def test_a_second_hardmax_construction_is_kept_only_where_it_proves_more():
    """The bundled demo (13 tokens, no binary16 claim): construct builds it again with the mean
    shift spaced for binary16, a different model, which proves no more (no binary16 claim, a
    binary32 bound five times larger) — so the bundle keeps the first model."""
    doc = load_document(REPO / "tfcert" / "examples" / "demo.json")
    data = read_dataset(doc)
    first, spaced = construct(data, "hardmax").model, construct(data, "hardmax", spaced=True).model
    assert spaced != first
    assert build(doc, "hardmax").construction.model == first
