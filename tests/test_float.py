"""The float claim: a constructed model's certified float64/float32 bounds hold
for numpy forward passes in three evaluation orders, and false float claims
fail verification."""
from __future__ import annotations

import json
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import dataset_json, datasets, write_json
from tfcert.bench.floatrun import DTYPES, deviation
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flint import fmpq

from tfcert.construct.bundle import build
from tfcert.construct.separation import bump_plan, sequence_means
from tfcert.verify.check import check_certificate
from tfcert.verify.evaluate import Replay
from tfcert.verify.floats import FORMATS, round_nearest
from tfcert.verify.formats import parse_document, read_model
from tfcert.canonical import dumps

ORDERS = ("numpy", "forward", "reverse")


def float_claims(files: dict) -> dict[str, Fraction]:
    cert = json.loads(files["certificate.json"])
    return {c["format"]: Fraction(c["bound"]) for ph in cert["phases"] for c in ph["claims"] if c["kind"] == "float"}


def exact_outputs(model, dataset):
    replay = Replay(model, [p.input for p in dataset.pairs])
    for _ in replay.steps():
        pass
    return replay.sequences()


def check_bounds(ds: dict, attention: str) -> dict[str, Fraction]:
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build(write_json(Path(tmp) / "ds.json", ds), attention)
    model, dataset = bundle.construction.model, bundle.dataset
    final = exact_outputs(model, dataset)
    claims = float_claims(bundle.files)
    if attention == "hardmax" and ds["d"] >= 3:  # nothing on a hat's far side: the bound is tiny
        assert "binary64" in claims, "a binary64 bound is always proven for such small data"
    with np.errstate(all="ignore"):
        for fmt, bound in claims.items():
            # bfloat16: tests/test_float_orders.py. numpy's own float16 order sums in float32 and
            # rounds once, outside the float model (docs/float.md): the issue asks for it, and it
            # holds on constructed models, but a random model can leave it (tests/test_exact_attack.py,
            # test_a_wider_accumulator_is_outside_the_float_model) — a finding, not a soundness bug
            for order in ORDERS if fmt in DTYPES else ():
                seen = deviation(model, [p.input for p in dataset.pairs], final, fmt, order)
                assert seen <= bound, (fmt, order, seen, float(bound))
    return claims


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(datasets(max_d=6, max_n_seq=4, max_len=6, max_tokens=24), st.sampled_from(["hardmax", "softmax"]))
@example(dataset_json(3, [([(1, 2, 3), (0, 0, 1), (5, -1, 2)], [(9, 9, 9), (-4, 0, 1)]),
                          ([(1, 2, 3), (7, 7, 0)], [(0, 0, 0)])]), "hardmax")
def test_observed_float_deviation_never_exceeds_the_certified_bound(ds, attention):
    check_bounds(ds, attention)


def test_binary64_and_binary32_on_one_sequence():
    """One sequence in d = 8: both formats certified, binary64 ≤ 1e-9·(1 + max|y|)."""
    rows = [(i - 20,) + tuple((7 * i + 3 * k * k + i * k) % 11 - 5 for k in range(1, 8)) for i in range(40)]
    targets = [tuple((i + k) % 7 - 3 for k in range(8)) for i in range(4)]
    claims = check_bounds(dataset_json(8, [(rows, targets)]), "hardmax")
    assert claims["binary64"] <= Fraction(1, 10 ** 9) * 4
    assert claims["binary32"] <= Fraction(1, 10 ** 3) * 4


# Sequences on one line whose means tie while they share tokens (sequence j: i·m_j·(1, 2, 0, …),
# i = 1 … n_j), the float survey's collinear kind cut down: each tie-break bump used to be a
# hat on a dense direction of the raw tokens, whose far side cancelled with slopes up to 211 and
# whose moved token λ then placed within 2.4e-9 of another in t (survey seed 110: no binary32
# claim, float32 runs 1.8e+02 off). Bumps now act on t alone, by a power of two ≤ gap/4.
COLLINEAR = dataset_json(8, [([(i * m, 2 * i * m) + (0,) * 6 for i in range(1, n + 1)],
                              [tuple((3 * j + 5 * r + k * k) % 11 - 5 for k in range(8)) for r in range(t)])
                             for j, (m, n, t) in enumerate(((2, 5, 1), (4, 2, 1), (5, 7, 7), (6, 7, 4), (7, 1, 1),
                                                            (8, 5, 1), (10, 6, 1), (12, 2, 1), (14, 4, 1), (16, 2, 1),
                                                            (17, 5, 1), (19, 6, 1), (20, 7, 1), (21, 5, 1)))])


def _within_the_survey_limits(claims: dict, ds: dict) -> None:
    scale = 1 + max(abs(Fraction(v)) for p in ds["pairs"] for y in p["output"] for v in y)
    assert claims["binary64"] <= Fraction(1, 10 ** 9) * scale
    assert claims["binary32"] <= Fraction(1, 10 ** 3) * scale


@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
def test_collinear_tie_breaks_keep_a_binary32_claim(attention):
    inputs = [[tuple(fmpq(int(v)) for v in x) for x in p["input"]] for p in COLLINEAR["pairs"]]
    assert len(bump_plan(inputs, sequence_means(inputs))) >= 3  # it has tie-break bumps
    _within_the_survey_limits(check_bounds(COLLINEAR, attention), COLLINEAR)


@pytest.mark.parametrize("shared", [False, True])
def test_where_float64_ranks_no_projection_the_mean_shift_is_0_unless_a_token_is_shared(shared, monkeypatch):
    """Where float64 ranks no (direction, λ) pair (large integer datasets: every dense candidate
    collides), the separation falls back to direction() and the first λ that separates, 0 first,
    as the ranked pairs do: with no shared token the attention adds nothing (V = 0 as u = 0), so
    every t stays exact; a token two sequences share needs λ ≠ 0."""
    import tfcert.construct.separation as separation
    from tfcert.construct.compress import compress
    from tfcert.verify.formats import read_dataset

    monkeypatch.setattr(separation, "_ranking", lambda *args: [])
    pairs = [{"input": [["1", "2"], ["3", "5"]], "output": [["1", "0"]]},
             {"input": [["4", "1"], ["3", "5"] if shared else ["7", "2"]], "output": [["0", "1"]]}]
    data = read_dataset(parse_document("d.json", dumps({"format": "tfcert.dataset/1", "d": 2, "pairs": pairs})))
    bump, sep = separation.separation(data, "hardmax", compress(data, "hardmax"))
    shift = (sep.blocks or bump.blocks)[-1].sa.V.terms[0][0]  # λ·e_t
    assert any(shift) == shared


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
def test_the_survey_collinear_dataset_seed_110_gets_a_binary32_claim(attention):
    from float_survey import dataset

    _within_the_survey_limits(check_bounds(dataset(110)[1], attention), dataset(110)[1])


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = Path(__file__).resolve().parent.parent / "certificates" / "demo-hardmax"
    return {name: (path / name).read_bytes() for name in ("model.json", "dataset.json", "certificate.json")}


def verify_with(files: dict, cert: dict):
    return check_certificate(parse_document("model.json", files["model.json"]),
                             parse_document("dataset.json", files["dataset.json"]),
                             parse_document("certificate.json", dumps(cert)))


def float_results(report):
    return [r for r in report.results if r.kind == "float"]


def test_a_bound_below_the_observed_deviation_is_rejected(demo):
    model = read_model(parse_document("model.json", demo["model.json"]))
    from tfcert.verify.formats import read_dataset
    dataset = read_dataset(parse_document("dataset.json", demo["dataset.json"]))
    final = exact_outputs(model, dataset)
    seen = deviation(model, [p.input for p in dataset.pairs], final, "binary64", "forward")
    assert seen > 0
    cert = json.loads(demo["certificate.json"])
    for c in cert["phases"][-1]["claims"]:
        if c["kind"] == "float" and c["format"] == "binary64":
            c["bound"] = str(Fraction(seen) / 2)
    results = float_results(verify_with(demo, cert))
    assert any(not r.ok and "bound: stated" in r.failures[0] for r in results)


def test_a_float_claim_fails_where_float_scores_tie():
    """Token scores 1 and 1 + 2^-60 differ exactly, but are both 1 in binary64:
    the float run averages two tokens where the exact one copies one."""
    eps = Fraction(1, 2 ** 60)
    ds = {"format": "tfcert.dataset/1", "d": 2,
          "pairs": [{"input": [["1", "0"], [str(1 + eps), "0"]], "output": [["1", "0"], [str(1 + eps), "0"]]}]}
    model = {"format": "tfcert.model/1", "d": 2, "attention": "hardmax",
             "blocks": [{"ff": {"eta": "1", "U": [], "b": [], "W": [[], []]},
                         "sa": {"rho": "0", "A": {"scale": "1", "low_rank": []},
                                "V": {"scale": "1", "low_rank": []}}}]}
    files = {"model.json": dumps(model), "dataset.json": dumps(ds)}
    cert = {"format": "tfcert.certificate/1", "model_sha256": parse_document("m", files["model.json"]).sha256,
            "dataset_sha256": parse_document("d", files["dataset.json"]).sha256, "attention": "hardmax",
            "theorem": "1.6", "phases": [{"name": "final", "blocks": [0, 1],
                                          "claims": [{"kind": "float", "format": "binary64", "bound": "1"}]}]}
    (result,) = float_results(verify_with(files, cert))
    assert not result.ok and "argmax gap" in result.failures[0]


@pytest.mark.parametrize("bad", [{"format": "binary8", "bound": "1"}, {"format": "binary64", "bound": "-1"},
                                 {"format": "binary64", "bound": "NaN"}])
def test_malformed_float_claims_are_input_errors(demo, bad):
    from tfcert.errors import InputError
    cert = json.loads(demo["certificate.json"])
    cert["phases"][-1]["claims"].append({"kind": "float", **bad})
    with pytest.raises(InputError, match="claims"):
        verify_with(demo, cert)


@settings(max_examples=300, deadline=None)
@given(st.floats(1e-300, 1e300), st.floats(0.5, 2.0), st.sampled_from(["binary64", "binary32"]))
def test_sterbenz_subtractions_are_exact(x, ratio, fmt):
    """The lemma the analysis relies on, checked against numpy: y/2 ≤ x ≤ 2y ⇒ x − y exact."""
    t = np.float64 if fmt == "binary64" else np.float32
    with np.errstate(over="ignore"):  # beyond binary32's range (or 2b beyond it): inf, skipped
        a, b = t(x), t(x * ratio)
        if not (np.isfinite(a) and np.isfinite(b)) or a == 0 or b == 0 or not b / 2 <= a <= 2 * b:
            return
    if abs(float(a)) < float(FORMATS[fmt].normal):
        return
    assert Fraction(float(a - b)) == Fraction(float(a)) - Fraction(float(b))


@settings(max_examples=200, deadline=None)
@given(st.fractions(-10 ** 6, 10 ** 6, max_denominator=10 ** 12))
def test_round_nearest_matches_python_for_binary64(q):
    from flint import fmpq
    r = round_nearest(fmpq(q.numerator, q.denominator), FORMATS["binary64"])
    assert Fraction(int(r.p), int(r.q)) == Fraction(float(q))


def _nearest(q: Fraction, precision: int, emin: int, emax: int):
    """Round to nearest, ties to even, by the definition: the two neighbours on the grid of
    q's binade (the subnormal one below 2^emin), the nearer or the even one; None: infinite."""
    if q == 0:
        return q
    a, e = abs(q), emin
    while a >= Fraction(2) ** (e + 1):
        e += 1
    spacing = Fraction(2) ** (e - precision + 1)
    low = (a // spacing) * spacing
    high = low + spacing
    r = low if a - low < high - a or a - low == high - a and (low / spacing) % 2 == 0 else high
    return None if r > (2 - Fraction(2) ** (1 - precision)) * Fraction(2) ** emax else (r if q > 0 else -r)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["binary64", "binary32", "binary16", "bfloat16"]),
       st.one_of(st.integers(-(2 ** 64), 2 ** 64), st.integers(-(2 ** 13), 2 ** 13)),
       st.sampled_from([1, 3, 5, 7, 10, 1000, 2 ** 20 + 1]), st.integers(-1200, 1100))
def test_round_nearest_is_the_nearest_number_in_every_format(name, m, d, e):
    """Dyadics (d = 1: every sum and product of a run, through floats.round_scaled's integer
    rounding) and other rationals, from subnormal to past the largest number."""
    from flint import fmpq
    fmt = FORMATS[name]
    q = Fraction(m, d) * Fraction(2) ** (e * (fmt.emax + fmt.precision) // 1100)
    want = _nearest(q, fmt.precision, fmt.emin, fmt.emax)
    try:
        r = round_nearest(fmpq(q.numerator, q.denominator), fmt)
    except OverflowError:
        assert want is None
        return
    assert Fraction(int(r.p), int(r.q)) == want


# --- the mean over literal-zero scores: every exp(0) a float run may return ---------------------

def _uniform_softmax_runs(xs: list[list], fmt, rng) -> list[list]:
    """Float means of softmax over scores that are literal zeros, as a run may compute them:
    each exp(0) anywhere within 2 ulps of 1, the sums in a random order, normalising before
    or after the weighted sum, by a division or a product with the rounded reciprocal."""
    from flint import fmpq

    r = lambda q: round_nearest(q, fmt)  # noqa: E731 - one rounding per operation
    up, down = fmpq(2) * fmt.unit, fmt.unit  # the spacing of the format above 1 and below it

    def total(terms: list) -> fmpq:
        terms = rng.sample(terms, len(terms))
        acc = terms[0]
        for t in terms[1:]:
            acc = r(acc + t)
        return acc
    runs = []
    for _ in range(4):
        e = [r(1 + rng.choice((-2, -1, 0, 0, 1, 2)) * (up if rng.random() < 0.5 else down)) for _ in xs]
        s = total(e)
        inverse = r(1 / s)
        for weight in (lambda el: r(el / s), lambda el: r(el * inverse)):  # a division, or the reciprocal
            runs.append([total([r(weight(el) * x[j]) for el, x in zip(e, xs)]) for j in range(len(xs[0]))])
        after = [total([r(el * x[j]) for el, x in zip(e, xs)]) for j in range(len(xs[0]))]
        runs += [[r(v / s) for v in after], [r(v * inverse) for v in after]]
    return runs


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["binary32", "binary16", "bfloat16"]),
       st.lists(st.tuples(st.integers(-300, 300), st.integers(-300, 300)), min_size=1, max_size=9, unique=True),
       st.sampled_from([100, 7, 64]), st.randoms(use_true_random=False))
def test_a_literal_zero_softmax_mean_stays_within_its_bound_whatever_exp_returns(name, points, scale, rng):
    """One softmax block with A = 0 and V = I: its output is the sequence's mean, each token
    weighed by whatever exp(0) returned (within 2 ulps of 1). The proven bound covers every
    such run, normalising before or after the sum, in any order."""
    from flint import fmpq

    from tfcert.verify.check import follow
    from tfcert.verify.float_analysis import Analysis
    from tfcert.verify.formats import FF, SA, Block, LowRank, Model

    fmt = FORMATS[name]
    one, zero = fmpq(1), fmpq(0)
    model = Model(2, "softmax", (Block(FF(one, (), (), ((), ())), SA(zero, LowRank(zero), LowRank(one))),), one)
    xs = [tuple(fmpq(a, scale) for a in p) for p in points]
    analysis = Analysis(model, [xs], fmt)
    mean_error, _ = analysis._uniform(xs, analysis.mag, analysis.err, True, range(2))  # the mean's own bound
    for step in Replay(model, [xs]).steps():
        follow([analysis], step)
    analysis.finish()
    assert analysis.failure is None and analysis.bound is not None
    exact = [sum((x[j] for x in xs), zero) / len(xs) for j in range(2)]
    rounded = [[round_nearest(v, fmt) for v in x] for x in xs]
    for run in _uniform_softmax_runs(rounded, fmt, rng):
        assert all(abs(a - b) <= fmpq(*e.as_integer_ratio()) for a, b, e in zip(run, exact, mean_error))
        assert max(abs(a - b) for a, b in zip(run, exact)) <= analysis.bound


def _uniform_bounds(xs: list[fmpq], fmt, softmax: bool) -> tuple[fmpq, fmpq]:
    """_uniform's (em, mm) for the one-coordinate tokens xs, as exact rationals (a softmax
    sequence of one token: _alone's, which the analysis takes for it)."""
    from tfcert.verify.float_analysis import Analysis
    from tfcert.verify.formats import FF, SA, Block, LowRank, Model

    one, zero = fmpq(1), fmpq(0)
    model = Model(1, "softmax" if softmax else "hardmax",
                  (Block(FF(one, (), (), ((),)), SA(zero, LowRank(zero), LowRank(one))),), one)
    toks = [(x,) for x in xs]
    analysis = Analysis(model, [toks], fmt)
    if softmax and len(toks) == 1:
        (em,), (mm,), _ = analysis._alone(toks[0], analysis.mag[0], analysis.err[0], (None,), [None])  # x̂ not known
    else:
        (em,), (mm,) = analysis._uniform(toks, analysis.mag, analysis.err, softmax, range(1))
    return fmpq(*em.as_integer_ratio()), fmpq(*mm.as_integer_ratio())


@pytest.mark.parametrize("name,n,reach", [("binary64", 400, fmpq(98, 100)), ("binary32", 300, fmpq(98, 100)),
                                          ("binary16", 60, fmpq(85, 100)), ("bfloat16", 10, fmpq(7, 10))])
def test_a_tie_average_that_loses_every_small_token_stays_within_its_bound(name, n, reach):
    """The hardmax mean of 1 (rounded down from 1 + 0.999u) and n − 1 copies of u: each 1 + u
    ties to even and loses u, so n − 1 additions and the division err by almost n roundings —
    γ_{n+1} of the mean's magnitude, the bound, is nearly attained (binary64: 0.99 of it), and
    every way of averaging (Σ/n, Σ x/n, Σ fl(1/n)·x, an FMA chain) stays within it."""
    fmt = FORMATS[name]
    r = lambda q: round_nearest(q, fmt)  # noqa: E731 - one rounding per operation
    u = fmt.unit
    xs = [1 + u * fmpq(999, 1000)] + [u * fmpq(1001, 1000)] * (n - 1)
    em, mm = _uniform_bounds(xs, fmt, softmax=False)
    xh, exact, w = [r(x) for x in xs], sum(xs, fmpq(0)) / n, r(fmpq(1, n))

    def chain(terms: list, fma: bool = False) -> fmpq:
        acc = r(w * terms[0]) if fma else terms[0]
        for t in terms[1:]:
            acc = r(w * t + acc) if fma else r(acc + t)
        return acc
    runs = [r(chain(xh) / n), chain([r(x / n) for x in xh]), chain([r(w * x) for x in xh]), chain(xh, fma=True)]
    assert all(abs(m - exact) <= em and abs(m) <= mm for m in runs)
    assert abs(runs[0] - exact) > reach * em  # the attack is as strong as claimed: a loosened bound shows too


def _lone_runs(xh: fmpq, fmt) -> list[fmpq]:
    """Every softmax mean of one token x̂ a float run may give, computed here on its own: each
    number of the format within 4u of 1 as exp(0), each normalisation — fl(fl(ê x̂)/ê),
    fl(ê/ê)·x̂, and either with the rounded reciprocal 1/ê."""
    r = lambda q: round_nearest(q, fmt)  # noqa: E731 - one rounding per operation
    weights = [1 + k * fmt.unit for k in (-4, -3, -2, -1, 0, 2, 4)]  # every number within 4u of 1
    return ([r(r(e * xh) / e) for e in weights] + [r(r(e / e) * xh) for e in weights]
            + [r(r(e * xh) * r(1 / e)) for e in weights] + [r(r(e * r(1 / e)) * xh) for e in weights])


@pytest.mark.parametrize("name,x", [("binary16", fmpq(1279501, 1024000)), ("bfloat16", fmpq(159501, 128000))])
def test_a_one_token_softmax_mean_stays_within_its_bound_whatever_exp_returns(name, x):
    """n = 1: m̂ = fl(fl(ê x̂)/ê) or fl(ê/ê)·x̂, or either with the rounded reciprocal 1/ê, for
    every ê within 4u of 1; x̂ = x rounded, off by almost half an ulp. The roundings beside the
    input's reach 0.6 of the bound, e + γ_3|x̂| (exp's error cancels in ê/ê)."""
    fmt = FORMATS[name]
    em, mm = _uniform_bounds([x], fmt, softmax=True)
    runs = _lone_runs(round_nearest(x, fmt), fmt)
    assert all(abs(m - x) <= em and abs(m) <= mm for m in runs)
    assert max(abs(m - x) for m in runs) > fmpq(3, 5) * em


@pytest.mark.parametrize("name", list(FORMATS))
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2 ** 11 - 1), st.integers(-20, -4), st.booleans())  # |x| < 128: x² fits binary16
def test_a_lone_tokens_known_mean_is_bounded_by_exactly_the_values_its_runs_take(name, m, exp, negative):
    """n = 1 and x̂ known: determined.alone lists the values m̂ takes, every number of the format
    within 4u of 1 as exp(0), each normalisation computed here on its own; the bound _alone
    takes from them is attained, and the mean is known (a copy, as under hardmax) exactly
    where they are one value."""
    from tfcert.verify import determined
    from tfcert.verify.check import follow
    from tfcert.verify.float_analysis import Analysis
    from tfcert.verify.formats import FF, SA, Block, LowRank, Model

    fmt = FORMATS[name]
    r = lambda q: round_nearest(q, fmt)  # noqa: E731
    x = r(fmpq(-m if negative else m) * fmpq(2) ** exp)
    runs = set(_lone_runs(x, fmt))
    assert determined.alone(x, fmt) == runs
    one, zero = fmpq(1), fmpq(0)
    model = Model(1, "softmax", (Block(FF(one, (), (), ((),)), SA(zero, LowRank(zero), LowRank(one))),), one)
    analysis = Analysis(model, [[(x,)]], fmt)
    (em,), (mm,), (g,) = analysis._alone((x,), analysis.mag[0], analysis.err[0], (x,), [frozenset(runs)])
    worst, close = max(abs(v - x) for v in runs), 1 + fmpq(1, 2 ** 45)  # bounds rounded up a few times
    assert worst <= fmpq(*em.as_integer_ratio()) <= worst * close
    assert max(abs(v) for v in runs) == fmpq(*mm.as_integer_ratio())  # a number of the format: binary64 holds it
    assert all(v / fmpq(2) ** g == int(v / fmpq(2) ** g) for v in runs)
    for step in Replay(model, [[(x,)]]).steps():
        follow([analysis], step)
    analysis.finish()
    assert analysis.bound == 0 if runs == {x} else analysis.bound >= worst  # (V̂ m̂ need not be proven exact)


@pytest.mark.parametrize("name", list(FORMATS))
@settings(max_examples=80, deadline=None)
@given(st.data(), st.integers(-12, 12), st.booleans())
def test_a_lone_token_is_copied_by_every_run_exactly_where_its_significand_is_below_5_4(name, data, exp,
                                                                                      negative):
    """docs/float.md (Limits): every exp(0) within 4u of 1 and every normalisation return x̂
    itself exactly when x̂'s significand is at most 5/4 − 2 ulps, in every format; above, some
    run is an ulp off. A d ≥ 4 code G + kS spans [G, 2G), where about three quarters of the codes
    would not be copied exactly by every run: under softmax, one token to a sequence, the leaders
    hold them lifted into [4G, 5G) (construct/leaders.py, lifted), where all are."""
    from tfcert.verify import determined

    fmt = FORMATS[name]
    ulp = fmpq(2) ** (1 - fmt.precision)
    k = data.draw(st.one_of(st.integers(0, 2 ** (fmt.precision - 1) - 1), st.sampled_from(
        [2 ** (fmt.precision - 3) + j for j in (-3, -2, -1, 0, 1)])))  # 5/4 is 1 + 2^(p−3) ulps
    significand = 1 + k * ulp
    x = (-significand if negative else significand) * fmpq(2) ** exp
    assert (determined.alone(x, fmt) == {x}) == (significand <= fmpq(5, 4) - 2 * ulp)


@pytest.mark.parametrize("seed", [43, 59, 163, 179])
def test_a_one_token_softmax_dataset_whose_runs_all_copy_gets_claims_of_0(seed, tmp_path):
    """Survey datasets of one token (equal means): every normalisation returns the token's known
    values whatever exp(0) returns, so the collapse copies it as a hardmax does, the snaps land it
    exactly, and every format's claim is 0 (before: a bound of γ_3 of the code carried through)."""
    import float_survey

    _, doc = float_survey.dataset(seed)
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps(doc))
    cert = json.loads(build(path, "softmax").files["certificate.json"])
    claims = {c["format"]: c["bound"] for c in cert["phases"][-1]["claims"] if c["kind"] == "float"}
    assert claims == {name: "0" for name in FORMATS}


@pytest.mark.slow  # about 10 s: the 200 datasets drawn again
def test_the_survey_files_are_what_their_commands_print():
    """docs/results/float-survey.txt is the summary of the committed float-survey.jsonl (and
    float-heldout.txt of float-heldout.jsonl, seeds 1000-1199), and
    float-data-limits.txt what --data-limits prints: docs/float.md cites both."""
    import float_survey

    results = Path(__file__).resolve().parent.parent / "docs" / "results"
    rows = [json.loads(line) for line in (results / "float-survey.jsonl").read_text().splitlines()]
    assert (results / "float-survey.txt").read_text() == float_survey.summary(rows) + "\n"
    held_out = [json.loads(line) for line in (results / "float-heldout.jsonl").read_text().splitlines()]
    assert {r["seed"] for r in held_out} == set(range(1000, 1200))
    assert (results / "float-heldout.txt").read_text() == float_survey.summary(held_out) + "\n"
    assert (results / "float-data-limits.txt").read_text() == float_survey.data_limits(200) + "\n"


def test_the_half_misses_files_cover_every_missing_half_precision_claim():
    """docs/results/float-half-misses.txt (and -heldout.txt), behind docs/float.md's table of
    missing half-precision claims: one line for each claim the survey's JSON lines miss (at most
    50 tokens, none within 1e-1), the data's limit exactly where the analysis stopped at an input
    beyond the range, and the head's counts those of the lines."""
    results = Path(__file__).resolve().parent.parent / "docs" / "results"
    for jsonl, txt in (("float-survey.jsonl", "float-half-misses.txt"),
                       ("float-heldout.jsonl", "float-half-misses-heldout.txt")):
        rows = [json.loads(line) for line in (results / jsonl).read_text().splitlines()]
        stops = {(r["seed"], r["attention"], f): why for r in rows for f, why in r.get("stops", {}).items()}
        text = (results / txt).read_text().splitlines()
        head, lines = text[1:5], text[5:]
        found = {}
        for line in lines:
            seed, attention, fmt, rest = line.split(None, 3)
            found[int(seed), attention, fmt] = rest.split(": ", 1)[1]
        assert found.keys() == stops.keys()
        assert all((why == "an input beyond the range") == found[k].startswith("the data") for k, why in stops.items())
        for line in head:
            attention, fmt, counts = line.split(" ", 2)
            mine = [v for (s, a, f), v in found.items() if (a, f) == (attention, fmt.rstrip(":"))]
            assert counts.startswith(f"{len(mine)} missing")
            misses = sum(v.startswith("run") and ("misses by" in v or "residual stream" in v) for v in mine)
            assert (f"a run misses {misses}" in counts) == (misses > 0)


def test_a_missing_half_precision_claim_is_shown_missing_by_a_run():
    """float_survey.half_misses on survey seed 155 (18 tokens, d = 2): its hardmax model has no
    bfloat16 claim, and the first emulated run, a forward chain, misses by more than 0.1 of
    1 + max|y| — by 86 of it; an input beyond the range is reported as the data's."""
    import float_survey

    row = {"seed": 155, "attention": "hardmax", "tokens": 18, "d": 2, "kind": "equal-means",
           "stops": {"binary16": "an input beyond the range", "bfloat16": "leaders: a unit that may switch"}}
    out = float_survey.half_misses([row], runs=0).splitlines()
    assert out[-2].endswith("the data: an input beyond the range")
    assert out[-1].endswith("bfloat16 18 tokens, d =  2 (equal-means): run 0 (forward) misses by 86")
    assert out[1] == "hardmax binary16: 1 missing; the data 1"
    assert out[2] == "hardmax bfloat16: 1 missing; a run misses 1"


def test_every_survey_seed_draws_a_dataset_the_assumptions_allow():
    """float_survey.dataset tells tokens apart by value, not by spelling: seed 1274 (mixed-scale)
    drew "0e3" and "0e-2", two input sets equal as numbers with different outputs, which no
    transformer can interpolate and construct rightly refused; now no seed up to 1300 draws one."""
    import float_survey
    from tfcert.verify.formats import parse_document, read_dataset

    for seed in range(1200, 1300):
        read_dataset(parse_document("d.json", json.dumps(float_survey.dataset(seed)[1]).encode()))


def test_the_survey_names_the_phase_where_an_analysis_stopped():
    """float_survey._stop, behind docs/float.md's table of where half precision stops: the phase of
    the first ReLU a run may switch where the message names one, else of the layer it stopped at
    (an SA of the separation or the collapse, an FF of the other phases), and the data's limit."""
    import float_survey

    cert = {"phases": [{"name": "bump", "blocks": [0, 2]}, {"name": "separation", "blocks": [1, 2]},
                       {"name": "leaders", "blocks": [2, 5]}, {"name": "collapse", "blocks": [4, 5]},
                       {"name": "interpolation", "blocks": [5, 9]}, {"name": "final", "blocks": [0, 9]}]}
    stop = lambda why: float_survey._stop(cert, why)  # noqa: E731
    assert stop("the input does not fit binary16: 3000000 overflows binary16") == "an input beyond the range"
    assert stop("block 7 FF: an error bound exceeds 4 (the first ReLU a float run may switch: block 3 FF: "
                "token [1, 0]: unit 0's pre-activation [0.1, 0.1] is within its error bound 0.2 of 0)") \
        == "leaders: a unit that may switch"
    assert stop("block 4 SA: token [0, 9]: argmax gap 0.09 to token 4 ≤ its score difference's error 0.16") \
        == "collapse: an argmax gap"
    assert stop("block 4 FF: coordinate 2 of the FF output may overflow binary16") == "leaders: an overflow"
    assert stop("block 1 SA: an error bound exceeds 3") == "separation: an error bound"
    assert stop("block 0 FF: an error bound exceeds 3") == "separation: an error bound"  # the bump phase's projection
    assert stop("block 1 FF: an error bound exceeds 3") == "bump: an error bound"
    assert stop("block 6 FF: an error bound exceeds 3") == "interpolation: an error bound"


@pytest.mark.slow  # about 12 s
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(datasets(max_d=6, max_n_seq=8, max_len=6, max_tokens=40), st.sampled_from(["hardmax", "softmax"]),
       st.booleans())
def test_a_format_that_fails_on_constructs_probe_fails_on_the_whole(ds, attention, short):
    """construct analyses a large dataset's formats on its first sequences and blocks first and
    drops a format that fails there (construct/build.py, float_analyses). With the probes on
    every dataset (PROBE = 0), each stage through its least number of blocks or (``short``) its
    share of them alone, construct's float bounds are those of the whole analysis, format by
    format: a format a probe refused has no bound on the whole either."""
    import tfcert.construct.build as cb
    from tfcert.verify.float_analysis import Analysis

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(cb, "PROBE", 0)
        mp.setattr(cb, "PROBES", tuple((share, 0) for share, _ in cb.PROBES) if short else cb.PROBES)
        bundle = build(write_json(Path(tmp) / "ds.json", ds), attention)
    model, inputs = bundle.construction.model, [p.input for p in bundle.dataset.pairs]
    useful = 1 + max(abs(v) for p in bundle.dataset.pairs for y in p.output for v in y)
    whole = [Analysis(model, inputs, fmt, give_up_above=useful) for fmt in FORMATS.values()]
    for step in Replay(model, inputs).steps():
        for analysis in whole:
            analysis.step(step)
    for analysis in whole:
        analysis.finish()
    assert [(name, bound) for name, bound, _ in bundle.floats] == [(a.fmt.name, a.bound) for a in whole]
