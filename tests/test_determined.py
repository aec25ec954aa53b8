"""Known values (verify/determined.py) and the exact evaluation lemma with
signs (verify/floats.py): a value the float analysis takes as known, and a
sum it takes as exact, must be what every evaluation docs/float.md allows
gives — every binary tree of the sum, each product rounded or fused into the
addition that takes it — and a token whose values are known carries |x̂ − x|
as its error."""
from __future__ import annotations

import json
import tempfile
from fractions import Fraction as F
from pathlib import Path

import floatforms
import pytest
from conftest import write_json
from flint import fmpq
from float_survey import attack, dataset, measure
from hypothesis import given, settings
from hypothesis import strategies as st
from test_float_attack import P, block, make

from tfcert.audit.audit import audit
from tfcert.construct.bundle import build
from tfcert.verify import determined
from tfcert.verify.evaluate import Replay
from tfcert.verify.floats import FORMATS, exact_sum, round_nearest, valuation


def evaluations(items, fmt) -> set:
    """Every value a float run may give the sum of ``items`` — ("p", a, b) a product, ("v", x)
    a number — over every pairing order, each product rounded or fused (a·b + c rounded once)."""
    r = lambda q: round_nearest(q, fmt)  # noqa: E731
    value = lambda t: r(t[1] * t[2]) if t[0] == "p" else t[1]  # noqa: E731
    if len(items) == 1:
        return {value(items[0])}
    out = set()
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            a, b = items[i], items[j]
            rest = [t for k, t in enumerate(items) if k not in (i, j)]
            new = {r(value(a) + value(b))}
            new |= {r(x[1] * x[2] + value(y)) for x, y in ((a, b), (b, a)) if x[0] == "p"}
            for v in new:
                out |= evaluations(rest + [("v", v)], fmt)
    return out


def number(fmt):
    """Numbers of the format of a few bits at scattered exponents (zeros included), so that
    products and sums round often."""
    return st.builds(lambda m, e: round_nearest(fmpq(m) * fmpq(2) ** e, fmt),
                     st.integers(-(2 ** 13), 2 ** 13), st.integers(-30, -8))  # products and sums stay finite


@st.composite
def sums(draw, size: int = 4):
    name = draw(st.sampled_from(["binary16", "bfloat16", "binary32"]))
    fmt = FORMATS[name]
    terms = draw(st.lists(st.tuples(number(fmt), number(fmt)), min_size=1 if size == 4 else size, max_size=size))
    return fmt, terms


@settings(max_examples=300, deadline=None)
@given(sums())
def test_a_short_sums_runs_are_every_value_its_evaluations_give(case):
    """determined.runs enumerates a sum of at most RUN_TERMS terms by its subsets: exactly the
    values of every binary tree, each product rounded or fused (this file's ``evaluations``,
    by pairings), where no part takes more than RUN_VALUES; total is known exactly where
    they all agree."""
    fmt, terms = case
    got = determined.runs(terms, fmt)
    every = evaluations([("p", a, b) for a, b in terms], fmt)
    assert got is None and len(every) > 1 or set(got) == every and list(got) == sorted(every)
    assert determined.total(terms, fmt) == (next(iter(every)) if len(every) == 1 else None)


@settings(max_examples=100, deadline=None)
@given(sums(5))
def test_a_sum_of_five_terms_that_rounds_is_enumerated_whole(case):
    """Five terms (a first layer's w·x̂ + b in d = 4): runs gives every value, or says it cannot."""
    fmt, terms = case
    got = determined.runs(terms, fmt)
    assert got is None or set(got) == evaluations([("p", a, b) for a, b in terms], fmt)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["binary16", "bfloat16", "binary32"]).flatmap(
    lambda name: st.tuples(st.just(FORMATS[name]), st.lists(number(FORMATS[name]), min_size=1, max_size=4))))
def test_a_tie_averages_values_are_what_every_evaluation_gives(case):
    """Hardmax over tied tokens (one coordinate each): Σ fl(1/n)·x̂_l, (Σ x̂_l)/n or
    (Σ x̂_l)·fl(1/n) (docs/float.md: a division or the rounded reciprocal), any order: the values
    determined.mean gives are exactly those."""
    fmt, column = case
    (got,) = determined.mean([(v,) for v in column], fmt, range(1))
    n = len(column)
    k = round_nearest(fmpq(1, n), fmt)
    scaled = evaluations([("p", k, v) for v in column], fmt)
    sums = evaluations([("v", v) for v in column], fmt)
    divided = {round_nearest(s / n, fmt) for s in sums} | {round_nearest(s * k, fmt) for s in sums}
    assert got is None and len(scaled | divided) > 1 or got == scaled | divided


def test_a_tie_average_by_the_rounded_reciprocal_is_one_of_two_values():
    """binary16, tokens 247/2, 245/32, 0 (found by a red-team run): the exact mean 1399/32 is a
    number of the format and Σ fl(1/3)·x̂_l and (Σ x̂_l)/3 both give it, but (Σ x̂_l)·fl(1/3)
    gives 699/16, 1/32 away — so the mean is one of the two and the claim is not 0."""
    fmt = FORMATS["binary16"]
    toks = [fmpq(247, 2), fmpq(245, 32), fmpq(0)]
    assert determined.mean([(v,) for v in toks], fmt, range(1)) == ({fmpq(1399, 32), fmpq(699, 16)},)
    model, data = make(2, [block(2, rho=0, A={"scale": "0", "low_rank": []}, V={"scale": "1", "low_rank": []})],
                       [[(t, 0) for t in (F(247, 2), F(245, 32), F(0))]])
    (fb,) = audit(model, data, floats=("binary16",)).floats
    assert fb.failure is None and F(int(fb.bound.p), int(fb.bound.q)) == F(1, 32)


def signed(products) -> list:
    return [(valuation(p), abs(p), (p > 0) - (p < 0)) for p in products]


@st.composite
def near_sums(draw):
    """Products of small numbers on a coarse grid: sums the lemma may cover, with cancellations."""
    name = draw(st.sampled_from(["binary16", "bfloat16", "binary32"]))
    fmt = FORMATS[name]
    small = st.builds(lambda m, e: round_nearest(fmpq(m) * fmpq(2) ** e, fmt), st.integers(-60, 60), st.integers(-3, 0))
    return fmt, draw(st.lists(st.tuples(small, small), min_size=1, max_size=4))


@settings(max_examples=300, deadline=None)
@given(near_sums())
def test_a_sum_the_signed_lemma_covers_is_exact_in_every_evaluation(case):
    """Every partial sum lies between minus the negative terms' magnitudes and the positive
    terms' (floats.exact_limit): where both are within 2^(p+E), every evaluation is exact."""
    fmt, terms = case
    products = [a * b for a, b in terms if a and b]
    if products and exact_sum(signed(products), fmt) is not None:
        assert evaluations([("p", a, b) for a, b in terms], fmt) == {sum(products, fmpq(0))}


def test_cancelling_terms_are_exact_where_their_magnitudes_add_up_to_more_than_the_format_holds():
    """binary16 (p = 11): 1500 − 1499 on the grid of 1. The magnitudes sum to 2999 > 2^11, so the
    unsigned lemma cannot say; each side is at most 1500 ≤ 2^11, so every evaluation gives 1."""
    fmt = FORMATS["binary16"]
    terms = [(fmpq(1500), fmpq(1)), (fmpq(-1499), fmpq(1))]
    assert exact_sum([(0, fmpq(1500)), (0, fmpq(1499))], fmt) is None
    assert exact_sum(signed([fmpq(1500), fmpq(-1499)]), fmt) == 0
    assert evaluations([("p", a, b) for a, b in terms], fmt) == {fmpq(1)}
    assert exact_sum(signed([fmpq(1500), fmpq(1499)]), fmt) is None  # 2999 on one side: 2999 rounds to 3000


def test_a_known_sum_counts_each_products_magnitude_on_its_own_side():
    """binary16: 1500·1 − 1499·1 + 3·1 is known (4 in every evaluation) although the magnitudes sum
    to 3002 > 2^11: each exact product's sign is known, so the positive side holds 1503 and the
    negative 1499 (determined.total); with 1500 + 1499 on one side it is not known, and the
    evaluations indeed differ."""
    fmt = FORMATS["binary16"]
    one = fmpq(1)
    terms = [(fmpq(1500), one), (fmpq(-1499), one), (fmpq(3), one)]
    assert determined.total(terms, fmt) == 4
    assert evaluations([("p", a, b) for a, b in terms], fmt) == {fmpq(4)}
    same_side = [(fmpq(1500), one), (fmpq(1499), one), (fmpq(3), one)]
    assert determined.total(same_side, fmt) is None
    assert len(evaluations([("p", a, b) for a, b in same_side], fmt)) > 1


def test_a_fused_product_that_changes_the_sum_is_not_known():
    """binary16: a = x = 1 + 2^-10, b = −(1 + 2^-9). fl(a·x) = 1 + 2^-9 loses 2^-20, so
    fl(fl(a·x) + b) = 0 while the fused a·x + b = 2^-20: the sum is not known. determined.runs
    gives both values, the unit relu(a·x + b) of a one-layer model branches its token into two
    alternatives, and the bound is the worse run's error, 2^-20 itself (covering the run without
    FMA), not a γ bound on the terms (about 2^-10)."""
    fmt = FORMATS["binary16"]
    a, b = fmpq(1) + fmpq(2) ** -10, -(fmpq(1) + fmpq(2) ** -9)
    assert evaluations([("p", a, a), ("v", b)], fmt) == {fmpq(0), fmpq(2) ** -20}
    assert determined.total([(a, a), (b, fmpq(1))], fmt) is None
    assert determined.runs([(a, a), (b, fmpq(1))], fmt) == (fmpq(0), fmpq(2) ** -20)
    model, data = make(2, [block(2, eta=0, U=[[1 + P(-10), 0]], b=[-(1 + P(-9))], W=[[1], [0]])],
                       [[[1 + P(-10), 0]]])
    (fb,) = audit(model, data, floats=("binary16",)).floats
    assert fb.failure is None and F(int(fb.bound.p), int(fb.bound.q)) == P(-20)


def test_a_token_branches_only_within_its_share_of_the_alternatives():
    """determined.ff branches a token on a unit of several values only while the combinations
    stay within ``branch`` (the analysis passes CHOICES over the token's alternatives): a token
    of 16 alternatives whose every unit takes two values would otherwise multiply the work per
    layer by 16 again (a red-team model: d = 104, seconds per token). Beyond, the coordinates the
    unit writes are unknown, and the interval bound speaks for them."""
    from types import SimpleNamespace as R
    fmt = FORMATS["binary16"]
    a, b = fmpq(1) + fmpq(2) ** -10, -(fmpq(1) + fmpq(2) ** -9)  # relu(a·a + b): 0 or 2^-20
    U = [R(hat=(a, fmpq(0)), support=(0,))]
    W = [R(hat=(fmpq(0),)), R(hat=(fmpq(1),))]
    args = ((a, fmpq(0)), (a, fmpq(2) ** -20), (0, 1), R(hat=(fmpq(1),)), U, R(hat=(b,)), W,
            [(), (0,)], (False,), fmt)
    assert determined.ff(*args) == ((a, fmpq(0)), (a, fmpq(2) ** -20))
    assert determined.ff(*args, branch=1) == ((a, None),)


def test_a_first_layer_on_inputs_no_format_holds_errs_by_its_runs_alone():
    """Survey seed 95 (29 cocircular tokens, d = 4, each coordinate a fraction such as
    2040/7369): t = w·x̂ + b is a sum of five terms whose products round. Bounded by γ_5 times its
    terms, a token's t erred by up to 8.2e-5 in binary16, more than half the gap to a neighbour,
    and a leader hat's unit could switch: no binary16 claim. Its runs (determined.runs) take at
    most two values per token, within 1.9e-5 of t; every leader hat's plateau absorbs that, and
    the claim is 0, as every emulated run lands."""
    _, doc = dataset(95)
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build(write_json(Path(tmp) / "ds.json", doc), "hardmax")
    cert = json.loads(bundle.files["certificate.json"])
    claims = {c["format"]: F(c["bound"]) for c in cert["phases"][-1]["claims"] if c["kind"] == "float"}
    assert claims["binary16"] == 0
    model, inputs = bundle.construction.model, [p.input for p in bundle.dataset.pairs]
    replay = Replay(model, inputs)
    for _ in replay.steps():
        pass
    assert floatforms.worst(model, inputs, replay.sequences(), "binary16", runs=2, seed=95) == 0


@pytest.mark.parametrize("seed", [103, 164, *(pytest.param(s, marks=pytest.mark.slow) for s in (111, 149))])
def test_runs_that_land_exactly_get_a_claim_of_0(seed):
    """Survey datasets whose every emulated binary32 run (each evaluation form, random trees, FMA)
    lands exactly, and whose binary32 claims were 5.3e-6, 6.5e-6 and 1.2e-5·(1 + max|y|):
    * seed 103 (16 cocircular tokens, d = 8): the first layer is relu(x/64 + b), one exact product
      and one addition, so every run computes the same code, 1/64 — the exact one — and everything
      after is exact (known values);
    * seed 164 (16 shared tokens, d = 8): the codes differ from run to run, but a leader hat's two
      on units, 100·σ1 − 100·σ2 with σ on the grid of 2^-21, cancel: either product is below 32 =
      2^(24 − 19), so every partial sum is exact (the lemma with signs) where their magnitudes add
      up to 46, and the hat passes no error on;
    * seed 111 (37 cocircular tokens, d = 4): a leader hat's output 47·σ0 − 47·σ1 rounds where a
      run fuses a product (FMA runs miss 47/32 by 2^-21), the collapse copies it times 32 into the
      code 47, and the snap's slopes 405 and 404 meet a code on the grid of 2^-16 — the hat's
      units' grain times the gain, kept from the terms (Analysis._floor), where the binade alone
      gives 2^-18 — so each of the snap's products is exact by the lemma and the snap maps every
      such code onto its target;
    * seed 149 (22 tokens, d = 3): its codes are side values on the circle, of at most six bits on
      the grid of 2^-3 (construct/leaders.py), and every run computes them exactly; with ten bits
      its claim was 7.8e-6, and a run with random trees and fused products carried a code's
      rounding of 2^-17 through a snap."""
    _, doc = dataset(seed)
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build(write_json(Path(tmp) / "ds.json", doc), "hardmax")
    cert = json.loads(bundle.files["certificate.json"])
    claims = {c["format"]: F(c["bound"]) for c in cert["phases"][-1]["claims"] if c["kind"] == "float"}
    assert claims["binary32"] == 0 and claims["binary64"] == 0
    model, inputs = bundle.construction.model, [p.input for p in bundle.dataset.pairs]
    replay = Replay(model, inputs)
    for _ in replay.steps():
        pass
    assert floatforms.worst(model, inputs, replay.sequences(), "binary32", runs=2, seed=seed) == 0


@pytest.mark.slow
def test_a_bound_above_0_where_numpy_lands_is_reached_by_another_run():
    """Survey seed 103 under softmax (16 cocircular tokens, d = 8): numpy's float32 runs land exactly
    on every target, yet the binary32 claim is 3.2e-7·(1 + max|y|). It is not slack: a run the
    float model allows (the survey's --attack: tests/floatforms.py's every form, random trees,
    fused products, exp(0) anywhere within its 4u) deviates by 0.5 of the bound (0.058 of 2.7e-6,
    before a short sum's evaluations were enumerated). Softmax seed
    164 was this example until the snaps' plateau R'/2, with which numpy's runs deviate too;
    hardmax seed 149 while the d ≤ 3 codes had ten bits; with six every run computes them
    exactly, and its claim is 0 (test_runs_that_land_exactly_get_a_claim_of_0)."""
    row = measure(103, "softmax")
    bound = row["relative"]["binary32"]
    assert row["runs"]["binary32"] == 0 and bound > 0
    assert bound / 100 <= attack(row) <= bound
