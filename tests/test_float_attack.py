"""Red-team cases for the float claim: models for which the certified float
bound (tfcert audit / verify/float_analysis.py) is smaller than the deviation
an actual float run (tfcert.bench.floatrun, allowed by docs/float.md) shows.
Each held while the bug was present; the analysis now either proves a bound
the float runs respect or refuses to give one (both are sound). Each case pins
which of the two it gets (BOUND or REFUSED), so an analysis that refused
everything, or that began to prove a bound the float run then has to respect,
is seen."""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import write_json  # noqa: F401  (keeps the tests/ import path)

from flint import arb, ctx, fmpq

from tfcert.audit.audit import audit
from tfcert.bench.floatrun import deviation
from tfcert.verify.enclose import Noise, bounds, noise_bound
from tfcert.verify.evaluate import Replay
from tfcert.verify.floats import FORMATS, round_nearest
from tfcert.canonical import dumps
from tfcert.verify.formats import parse_document, read_dataset, read_model

ORDERS = ("numpy", "forward", "reverse")
ORDERS_EMU = ("forward", "reverse", "random", "fma")  # tests/softmax_adversary.py's


def P(k: int) -> F:
    return F(2) ** k


def s(q) -> str:
    q = F(q)
    return f"{q.numerator}/{q.denominator}"


def lr(scale, terms=()):
    return {"scale": s(scale), "low_rank": [{"u": [s(a) for a in u], "v": [s(b) for b in v]} for u, v in terms]}


def block(d, eta=1, U=(), b=(), W=None, rho=1, A=None, V=None):
    W = W if W is not None else [[] for _ in range(d)]
    return {"ff": {"eta": s(eta), "U": [[s(x) for x in r] for r in U], "b": [s(x) for x in b],
                   "W": [[s(x) for x in r] for r in W]},
            "sa": {"rho": s(rho), "A": A or lr(0), "V": V or lr(0)}}


def make(d, blocks, seqs, attention="hardmax"):
    m = {"format": "tfcert.model/1", "d": d, "attention": attention, "blocks": blocks}
    ds = {"format": "tfcert.dataset/1", "d": d,
          "pairs": [{"input": [[s(x) for x in t] for t in seq], "output": [[s(x) for x in seq[0]]]} for seq in seqs]}
    return read_model(parse_document("m.json", dumps(m))), read_dataset(parse_document("d.json", dumps(ds)))


BOUND, REFUSED = "proves a bound", "refuses"


def proves(fb, expected: str) -> bool:
    """Whether the analysis proved a bound (``fb``: one FloatBound), asserting first that it did
    what the case expects: BOUND, which the float run must then respect, or REFUSED."""
    got = BOUND if fb.failure is None else REFUSED
    assert got == expected, f"pinned: the analysis {expected}; it {got} ({fb.failure or fb.bound})"
    return got == BOUND


def assert_sound(model, dataset, fmt, expected: str):
    """The case's pinned outcome; for a bound, every accumulation order's float run within it."""
    (fb,) = audit(model, dataset, floats=(fmt,)).floats
    if not proves(fb, expected):
        return
    replay = Replay(model, [p.input for p in dataset.pairs])
    for _ in replay.steps():
        pass
    final = replay.sequences()
    with np.errstate(all="ignore"):
        seen = max(deviation(model, [p.input for p in dataset.pairs], final, fmt, o) for o in ORDERS)
    bound = F(int(fb.bound.p), int(fb.bound.q))
    assert seen <= bound, f"{fmt}: observed {float(seen)} > certified {float(bound)}"


# 1. _sterbenz ignores U entries that round to 0 in the format: it looks only at
#    row.hat's nonzero entries and then drops absdot(row.delta, mag) from the
#    pre-activation error. U row (1, 2^-1100): 2^-1100 is 0 in binary64, so the
#    float run loses 2^-1100 · x_2 = 2^-100; the certified bound is ~9e-47.
# fixed: "_sterbenz drops the rounding of U entries that round to 0"
@pytest.mark.parametrize("fmt,tiny_u,x2,k", [("binary64", -1100, 1000, 1000), ("binary32", -160, 120, 100)])
def test_sterbenz_with_an_entry_rounded_to_zero(fmt, tiny_u, x2, k):
    model, dataset = make(2, [block(2, eta=0, U=[(1, P(tiny_u))], b=[-P(-k)], W=[[1], [0]])],
                          [[(F(3, 2) * P(-k), P(x2))]])
    assert_sound(model, dataset, fmt, BOUND)


# 2. Dense V = Σ u vᵀ (allowed by docs/float.md): an entry u_j v_k that
#    underflows to 0 errs by up to tiny/2 *absolute*, then multiplies |m| ≫ 1.
#    _sa_out only adds (d + 2r + 2)·tiny, not tiny·|m|. V = u uᵀ, u = (2^-540, 0),
#    m = (2^600, 0): exact V m = 2^-480, float 0; certified 2.8e-160.
# fixed: "dense V: underflow of entries u_j v_k is not scaled by |m|"
@pytest.mark.parametrize("fmt,eu,ex,expected", [("binary64", -540, 600, REFUSED), ("binary32", -75, 60, BOUND)])
def test_dense_v_entry_underflow(fmt, eu, ex, expected):
    model, dataset = make(2, [block(2, rho=0, V=lr(0, [((P(eu), 0), (P(eu), 0))]))], [[(P(ex), 0)]])
    assert_sound(model, dataset, fmt, expected)


# 3. The same for dense A in hardmax: A = u uᵀ with u = (2^-540, 0) is the zero
#    matrix in binary64, every float score is 0 and the float run averages both
#    tokens, where the exact one copies the argmax (gap 2^-81 ≫ 2 × the claimed
#    score error ~1e-40). _score_error adds (d² + …)·tiny, not tiny·|x_i||x_l|.
# fixed: "dense A: entry underflow not scaled by the token magnitudes"
def test_dense_a_entry_underflow_breaks_the_argmax():
    model, dataset = make(2, [block(2, rho=0, A=lr(0, [((P(-540), 0), (P(-540), 0))]), V=lr(1))],
                          [[(P(500), 0), (P(499), 1)]])
    assert_sound(model, dataset, "binary64", REFUSED)


# 4. Dense A/V entries can overflow although every bilinear/apply bound checked
#    by _check_range is small: u_j v_k = 2^1200 is inf in binary64 (2^140 in
#    binary32); the float run produces inf/NaN, the analysis certifies a finite bound.
# fixed: "overflow of dense A/V entries is never checked"
@pytest.mark.parametrize("fmt,eu,ex", [("binary64", 600, -700), ("binary32", 70, -80)])
def test_dense_v_entry_overflow(fmt, eu, ex):
    model, dataset = make(2, [block(2, rho=0, V=lr(0, [((P(eu), 0), (P(eu), 0))]))], [[(P(ex), 0)]])
    assert_sound(model, dataset, fmt, REFUSED)


# fixed: "overflow of dense A entries is never checked"
def test_dense_a_entry_overflow():
    model, dataset = make(2, [block(2, A=lr(0, [((P(600), 0), (P(600), 0))]), V=lr(0, [((1, 0), (0, 1))]))],
                          [[(P(-700), 0), (P(-701), 1)]])
    assert_sound(model, dataset, "binary64", REFUSED)


# 5. _uniform (hardmax with A = 0: every token ties, the mean of n tokens)
#    allows one tiny for underflow, but Σ (1/n)·x_l has n products that may each
#    underflow by tiny/2. n = 100 tokens with x_1 = 40·tiny: each (1/100)·40·tiny
#    rounds to 0, exact mean 40·tiny; certified 5 tiny.
# fixed: "_uniform counts one tiny, not n·tiny/2, for underflow"
def test_uniform_mean_underflow():
    tiny = P(-1074)
    model, dataset = make(2, [block(2, rho=0, V=lr(1))], [[(40 * tiny, i * tiny) for i in range(100)]])
    assert_sound(model, dataset, "binary64", BOUND)


# 6. Softmax attention with ρ = 1 and V = 0 is skipped by the analysis
#    ("x̂ + 0·(finite) = x̂"), but only the score A.bilinear is range-checked,
#    not s/τ: with τ = 2^-100 and scores 2^1000 the scaled scores overflow, the
#    float run computes exp(inf − inf) = NaN and V·m = 0·NaN = NaN. Certified: 0.
#    (tfcert.bench.floatrun skips such layers too, so an evaluator that runs the
#    layer by its formula is used.)
# fixed: "the ρ=1, V=0 shortcut does not range-check s/τ for softmax"
def test_softmax_noop_attention_with_overflowing_scaled_scores():
    m = {"format": "tfcert.model/1", "d": 2, "attention": "softmax", "temperature": s(P(-100)),
         "blocks": [block(2, A=lr(1))]}
    toks = [(P(500), 0), (P(499), 0)]
    ds = {"format": "tfcert.dataset/1", "d": 2,
          "pairs": [{"input": [[s(x) for x in t] for t in toks], "output": [[s(x) for x in toks[0]]]}]}
    model, dataset = read_model(parse_document("m.json", dumps(m))), read_dataset(parse_document("d.json", dumps(ds)))
    (fb,) = audit(model, dataset, floats=("binary64",)).floats
    if not proves(fb, REFUSED):
        return
    X = np.array([[float(x) for x in t] for t in toks])
    with np.errstate(all="ignore"):
        S = (X @ X.T) / np.float64(2.0 ** -100)
        Z = np.exp(S - S.max(axis=1, keepdims=True))
        out = X * 1.0 + (Z / Z.sum(axis=1, keepdims=True)) @ X @ np.zeros((2, 2))
    assert np.isfinite(out).all(), f"float run gives {out}, certified bound {fb.bound}"


# 7. Dense A with finite entries, but the intermediate Â x̂_i overflows: A = I +
#    u vᵀ, u = (0, 2^500), v = (2^500, 0), so Â_21 = 2^1000; every token has
#    x_2 = 0, so the bilinear bound (|v|·x_i)(|u|·M) that _check_range sees is 0,
#    yet (Â x_i)_2 = 2^1030 = inf and inf·0 = NaN in the score.
# fixed: "dense A: the intermediate A x_i is never range-checked"
def test_dense_a_times_x_overflow():
    model, dataset = make(2, [block(2, rho=0, A=lr(1, [((0, P(500)), (P(500), 0))]), V=lr(1))],
                          [[(P(30), 0), (P(29), 0)]])
    assert_sound(model, dataset, "binary64", REFUSED)


# 8. Hardmax with A = 0 (as stored): all n tokens tie and the float run averages
#    them, allowed as (Σ x_l)/n. _uniform range-checks only the mean, never the
#    sum: four tokens with x_1 = 2^1022 sum to 2^1024 = inf in binary64. With
#    V = I, ρ = 0 the certified bound is finite (≈5e299), the run gives inf/NaN;
#    with ρ = 1, V = 0 (the shortcut) the certified bound is 0 and the run gives NaN.
# fixed: "_uniform / the ρ=1,V=0 shortcut never range-check Σ x_l of a tie average"
@pytest.mark.parametrize("rho,V", [(0, lr(1)), (1, lr(0))])
def test_tie_average_sum_overflows(rho, V):
    toks = [(P(1022), i) for i in range(4)]
    model, dataset = make(2, [block(2, rho=rho, V=V)], [toks])
    (fb,) = audit(model, dataset, floats=("binary64",)).floats
    if not proves(fb, REFUSED):
        return
    X = np.array([[float(x) for x in t] for t in toks])
    with np.errstate(all="ignore"):
        mean = X.sum(axis=0) / np.float64(len(toks))          # the tie average as (Σ x)/k
        out = np.float64(rho) * X + np.float64(float(model.blocks[0].sa.V.scale)) * mean
    assert np.isfinite(out).all(), f"float run gives {out[0]}, certified bound {float(fb.bound):.3g}"


# 9. The low-rank form has the same defect: c = v·m underflows by up to d·tiny/2
#    absolute and is then multiplied by u. V = u vᵀ with u = (2^600, 0),
#    v = (2^-600, 0), m = (2^-500, 0): c = 2^-1100 → 0, so V m = 2^-500 exactly but
#    0 in binary64; certified 2.7e-166, observed 3.05e-151. For A (scores
#    q_i k_l with q_i = v·x_i underflowing) every float score is 0, the run
#    averages where the exact run copies the argmax: observed 0.5, certified 1.7e-166.
def _low_rank_run(toks, A_terms, V_terms, attention_scores: bool):
    X = np.array([[float(x) for x in t] for t in toks])
    if attention_scores:
        (u, v), = A_terms
        q = X @ np.array([float(x) for x in v])            # v·x_i
        k = X @ np.array([float(x) for x in u])            # u·x_l
        S = np.outer(q, k)
        Pm = (S == S.max(axis=1, keepdims=True)).astype(float)
        M = (Pm / Pm.sum(axis=1, keepdims=True)) @ X
    else:
        M = X
    out = np.zeros_like(M)
    for u, v in V_terms:
        out += np.outer(M @ np.array([float(x) for x in v]), np.array([float(x) for x in u]))
    return out


# fixed: "low-rank V: underflow of v·m is not scaled by |u|"
def test_low_rank_v_underflow():
    toks = [(P(-500), 0)]
    terms = [((P(600), 0), (P(-600), 0))]
    model, dataset = make(2, [block(2, rho=0, V=lr(0, terms))], [toks])
    (fb,) = audit(model, dataset, floats=("binary64",)).floats
    if not proves(fb, BOUND):
        return
    exact = P(-500)
    got = _low_rank_run(toks, None, terms, False)
    seen = abs(F(float(got[0, 0])) - exact)
    assert seen <= F(int(fb.bound.p), int(fb.bound.q)), f"observed {float(seen):.3g} > certified {float(fb.bound):.3g}"


# fixed: "low-rank A: underflow of v·x_i is not scaled by |u·x_l|"
def test_low_rank_a_underflow_breaks_the_argmax():
    toks = [(P(-500), 0), (P(-501), 1)]
    A_terms = [((P(600), 0), (P(-600), 0))]
    model, dataset = make(2, [block(2, rho=0, A=lr(0, A_terms), V=lr(1))], [toks])
    (fb,) = audit(model, dataset, floats=("binary64",)).floats
    if not proves(fb, REFUSED):
        return
    got = _low_rank_run(toks, A_terms, [((1, 0), (1, 0)), ((0, 1), (0, 1))], True)
    seen = abs(F(float(got[0, 1])) - 0)          # exact: both tokens copy token 0, coordinate 2 is 0
    assert seen <= F(int(fb.bound.p), int(fb.bound.q)), f"observed {float(seen):.3g} > certified {float(fb.bound):.3g}"


# End to end: `verify` accepts the float claim of finding 1 (certificate made
# by audit.certificate, exact claim included), although numpy misses by 7.9e-31.
# fixed: "_sterbenz drops the rounding of U entries that round to 0"
def test_verify_accepts_a_false_float_claim():
    from tfcert.audit.audit import certificate
    from tfcert.verify.check import check_certificate
    blocks = [block(2, eta=0, U=[(1, P(-1100))], b=[-P(-1000)], W=[[1], [0]])]
    x = (F(3, 2) * P(-1000), P(1000))
    y = (P(-1001) + P(-100), 0)                              # the exact output (η = 0)
    m = {"format": "tfcert.model/1", "d": 2, "attention": "hardmax", "blocks": blocks}
    ds = {"format": "tfcert.dataset/1", "d": 2, "pairs": [{"input": [[s(v) for v in x]], "output": [[s(v) for v in y]]}]}
    mb, db = dumps(m), dumps(ds)
    model, dataset = read_model(parse_document("m", mb)), read_dataset(parse_document("d", db))
    cert = certificate(audit(model, dataset, floats=("binary64",)), mb, db, len(model.blocks))
    assert any(c["kind"] == "float" for ph in cert["phases"] for c in ph["claims"])  # pinned: a bound is claimed
    report = check_certificate(parse_document("model.json", mb), parse_document("dataset.json", db),
                               parse_document("certificate.json", dumps(cert)))
    assert all(r.ok for r in report.results)
    (claim,) = [c for ph in cert["phases"] for c in ph["claims"] if c["kind"] == "float"]
    seen = deviation(model, [dataset.pairs[0].input], [[tuple(__import__("flint").fmpq(v.numerator, v.denominator) for v in y)]],
                     "binary64", "numpy")
    assert seen <= F(claim["bound"]), f"verify accepted bound {float(F(claim['bound'])):.3g}, numpy misses by {float(seen):.3g}"


# 10. Low-rank intermediates overflow while the products that are range-checked
#     stay small: V = u vᵀ with v = (2^600, 0), u = (2^-600, 0), m = (2^500, 0):
#     c = v·m = 2^1100 = inf in binary64, V m = inf, exactly 2^500; the analysis
#     checks only |u|(|v|·m) = 2^500 and certifies a finite bound.
# fixed: "low-rank V: the intermediate v·m is never range-checked"
def test_low_rank_v_intermediate_overflow():
    toks = [(P(500), 0)]
    terms = [((P(-600), 0), (P(600), 0))]
    model, dataset = make(2, [block(2, rho=0, V=lr(0, terms))], [toks])
    (fb,) = audit(model, dataset, floats=("binary64",)).floats
    if not proves(fb, REFUSED):
        return
    with np.errstate(all="ignore"):
        got = _low_rank_run(toks, None, terms, False)
    assert np.isfinite(got).all(), f"float run gives {got[0]}, certified bound {float(fb.bound):.3g}"


# 11. A softmax layer after one that left enclosures, with a low-rank A: the
#     analysis built the score table over the enclosures before refusing them,
#     and the verifier died with a traceback (TypeError) instead of a verdict.
# fixed: "softmax over enclosures: the refusal comes before the score table"
def test_softmax_over_enclosures_with_low_rank_scores_is_refused_not_a_crash():
    from tfcert.verify.float_analysis import Analysis

    blocks = [block(2, A=lr(1), V=lr(1)), block(2, A=lr(0, [((1, 0), (0, 1))]), V=lr(1))]
    m = {"format": "tfcert.model/1", "d": 2, "attention": "softmax", "temperature": "1", "blocks": blocks}
    model = read_model(parse_document("m.json", dumps(m)))
    inputs = [tuple(tuple(fmpq(v) for v in t) for t in [(0, 1), (1, 0), (2, 3)])]
    analysis = Analysis(model, inputs, FORMATS["binary64"])
    for step in Replay(model, inputs).steps():
        analysis.step(step)
    assert "softmax attention over enclosures" in analysis.failure


def _hardmax_run(X, A, V, rho, t, scale=None):
    """A hardmax SA layer in IEEE arithmetic of dtype t, every product and sum
    rounded separately: scores with the dense A in tfcert.bench.floatrun's order
    (Â x̂_i first, then its dot product with x̂_l), or, given ``scale``, in the
    low-rank form's scale·⟨x̂_i, x̂_l⟩."""
    n, d = len(X), len(X[0])
    out = []
    for i in range(n):
        if scale is None:
            Ax = [sum((t(A[c][j] * X[i][j]) for j in range(d)), t(0)) for c in range(d)]
            sc = [sum((t(Ax[c] * X[l][c]) for c in range(d)), t(0)) for l in range(n)]
        else:
            sc = [t(scale * sum((t(X[i][c] * X[l][c]) for c in range(d)), t(0))) for l in range(n)]
        top = [l for l in range(n) if sc[l] == max(sc)]
        w = t(1) / t(len(top))
        m = [sum((t(w * X[l][c]) for l in top), t(0)) for c in range(d)]
        out.append([t(rho * X[i][c]) + sum((t(V[c][j] * m[j]) for j in range(d)), t(0)) for c in range(d)])
    return out


def _verified_bound(m: dict, ds: dict, expected: str, fmt: str = "binary64", phases: list | None = None,
                    top: dict | None = None) -> F | None:
    """The float bound that audit proves and verify accepts, in audit's
    certificate or, given ``phases``, in theirs (the float claim appended to
    the last one); None when the analysis refuses, as the case ``expected``."""
    from tfcert.audit.audit import certificate
    from tfcert.verify.check import check_certificate

    mb, db = dumps(m), dumps(ds)
    model, dataset = read_model(parse_document("m", mb)), read_dataset(parse_document("d", db))
    report = audit(model, dataset, floats=(fmt,))
    (fb,) = report.floats
    if not proves(fb, expected):
        return None
    if phases is None:
        cert = certificate(report, mb, db, 1)
    else:
        phases[-1]["claims"].append({"kind": "float", "format": fmt, "bound": str(fb.bound)})
        cert = {"format": "tfcert.certificate/1", "model_sha256": parse_document("m", mb).sha256,
                "dataset_sha256": parse_document("d", db).sha256, **top, "phases": phases}
    verdict = check_certificate(parse_document("model.json", mb), parse_document("dataset.json", db),
                                parse_document("certificate.json", dumps(cert)))
    assert verdict.ok, [r.failures for r in verdict.results if not r.ok]  # verify re-proves audit's bound
    return F(int(fb.bound.p), int(fb.bound.q))


def _one_layer(x1, x2, ys, A, V) -> tuple[dict, dict]:
    m = {"format": "tfcert.model/1", "d": 2, "attention": "hardmax", "blocks": [block(2, rho=0, A=A, V=V)]}
    ds = {"format": "tfcert.dataset/1", "d": 2,
          "pairs": [{"input": [[s(v) for v in x1], [s(v) for v in x2]], "output": [[s(v) for v in y] for y in ys]}]}
    return m, ds


# 12. _score_error counted the underflow of the dense Â x̂_i (Â_cj·x̂_ij, tiny/2
#     each) as d·Σ|x_i|·tiny, but each underflowed coordinate is then
#     multiplied by x̂_lc: up to 2^600·tiny here. A = 2^-600·I, x1 = (2^-500, 0),
#     x2 = (2^600, 0): (Â x̂1)_1 = 2^-1100 → 0, both float scores of token 1 are
#     0 and the run averages x1, x2 where the exact run copies x2 (gap 2^-500,
#     claimed score error ≈ 2^-552). Output V m, V = 2^-600·I: exact (1, 0),
#     float (1/2, 0); verify accepted a binary64 bound of 5.6e-16.
# fixed: "score error: the underflow of Â x̂_i is scaled by the other token"
@pytest.mark.parametrize("fmt,es,e1,e2", [("binary64", -600, -500, 600), ("binary32", -100, -60, 100)])
def test_dense_a_times_x_underflow_is_scaled_by_the_other_token(fmt, es, e1, e2):
    t = {"binary64": np.float64, "binary32": np.float32}[fmt]
    x1, x2, y = (P(e1), F(0)), (P(e2), F(0)), (F(1), F(0))
    bound = _verified_bound(*_one_layer(x1, x2, [y], lr(P(es)), lr(P(-e2))), REFUSED, fmt)
    if bound is None:
        return
    # every value is a power of two (or 0), so rounding to the format is exact
    X = [[t(float(v)) for v in x1], [t(float(v)) for v in x2]]
    A = [[t(float(P(es))), t(0)], [t(0), t(float(P(es)))]]
    V = [[t(float(P(-e2))), t(0)], [t(0), t(float(P(-e2)))]]
    with np.errstate(all="ignore"):
        out = _hardmax_run(X, A, V, t(0), t)
    seen = max(abs(F(float(v)) - w) for row in out for v, w in zip(row, y))
    assert seen <= bound, f"{fmt}: verify accepted bound {float(bound):.3g}, the float run misses by {float(seen):.3g}"


# 13. The low-rank form's scores scale·⟨x̂_i, x̂_l⟩ + Σ (v·x̂_i)(u·x̂_l): the
#     underflow of ⟨x̂_i, x̂_l⟩ was not scaled by |scale| (scale 2^600, tokens
#     2^-540: every product x̂_ij·x̂_lj underflows to 0, the scores tie), and
#     ⟨x̂_i, x̂_l⟩ was not range-checked before a small scale (scale 2^-600,
#     tokens 2^600: it overflows to inf). Token 1's exact argmax is itself;
#     the float run averages both tokens (error 0.5) or gives inf. Both
#     certificates passed verify.
# fixed: "score error: the scale multiplies the underflow of ⟨x̂_i, x̂_l⟩; ⟨x̂_i, x̂_l⟩ is range-checked"
@pytest.mark.parametrize("scale,e,outputs", [(600, -540, 2), (-600, 600, 1)])
def test_scaled_dot_product_scores(scale, e, outputs):
    x1, x2 = (P(e), F(0)), (P(e - 1), F(1))
    bound = _verified_bound(*_one_layer(x1, x2, [x1, x2][:outputs], lr(P(scale)), lr(1)), REFUSED)
    if bound is None:
        return
    t = np.float64
    X = [[t(float(v)) for v in x1], [t(float(v)) for v in x2]]
    with np.errstate(all="ignore"):
        out = _hardmax_run(X, None, [[t(1), t(0)], [t(0), t(1)]], t(0), t, scale=t(float(P(scale))))
    assert np.isfinite(out).all(), f"float run gives {out[0]}, certified bound {float(bound):.3g}"
    seen = max(abs(F(float(v)) - w) for v, w in zip(out[0], x1))
    assert seen <= bound, f"verify accepted bound {float(bound):.3g}, the float run misses by {float(seen):.3g}"


def _fl(q) -> F:
    """q rounded to binary64, as an exact fraction."""
    r = round_nearest(fmpq(F(q).numerator, F(q).denominator), FORMATS["binary64"])
    return F(int(r.p), int(r.q))


# 14. Softmax, unique argmax (the tight path): a weight whose exp underflows
#     was allowed (1 + 4u)·w + tiny, one subnormal spacing, but exp errs by up
#     to 2 ulps = 2·tiny there (the general path's floor counts two). e^-2048
#     may come back as 2·tiny; times a token 2^530 that is 2^-543 where the
#     analysis allowed ≈ 1.03·2^-544. A snap whose plateau ends between the two
#     (its ramp unit proven off, on in the float run, slope 2^544) turns it
#     into a miss of 1/2 under a verified bound of 2e-15.
# fixed: "softmax tight path: an underflowed weight errs by EXP_ULPS subnormal spacings"
def test_softmax_tight_path_underflowed_weight_gets_two_ulps():
    c, L, K, eps = P(-500), P(530), P(11), P(-545)
    xa, xl, y, e1 = (c, 0, 1, 0), (0, L, 0, 1), (c, F(1), 0, 0), (F(1), 0, 0, 0)
    bp = [c - 5 * eps, c - 3 * eps, c + 3 * eps, c + 5 * eps]
    W0 = [(y[i] - bp[1] * e1[i]) / (bp[1] - bp[0]) for i in range(4)]
    W2 = [(bp[3] * e1[i] - y[i]) / (bp[3] - bp[2]) for i in range(4)]
    cols = [W0, [-e1[i] - W0[i] for i in range(4)], W2, [e1[i] - W2[i] for i in range(4)]]
    W = [[cols[k][i] for k in range(4)] for i in range(4)]
    blocks = [block(4, rho=0, A=lr(0, [((0, 0, K, 0), (0, 0, 1, 1))]), V=lr(0, [((1, 0, 0, 0), (1, 1, 0, 0))])),
              block(4, U=[e1] * 4, b=[-p for p in bp], W=W)]
    m = {"format": "tfcert.model/1", "d": 4, "attention": "softmax", "temperature": "1", "blocks": blocks}
    ds = {"format": "tfcert.dataset/1", "d": 4,
          "pairs": [{"input": [[s(v) for v in xa], [s(v) for v in xl]], "output": [[s(v) for v in y]]}]}
    with ctx.workprec(128):
        radius = bounds(noise_bound(Noise(fmpq(1, 2 ** 500), ((fmpq(2 ** 11), fmpq(2 ** 530) - fmpq(1, 2 ** 500), 1),)),
                                    fmpq(1)))[1]
    phases = [
        {"name": "collapse", "blocks": [0, 1], "claims": [
            {"kind": "tau_star", "block": 0, "tau_star": "1", "radius": str(radius), "noise_bound": str(radius),
             "step": "1/65536", "closed_form": "255/256"}]},
        {"name": "interpolation", "blocks": [1, 2], "claims": [
            {"kind": "snap", "block": 1, "units": [0, 1, 2, 3], "coordinate": 0, "center": s(c),
             "radius": s(3 * eps), "reach": s(5 * eps), "moves": [[0, 0], [0, 1]], "to": [s(v) for v in y]}]},
        {"name": "final", "blocks": [0, 2], "claims": [{"kind": "exact"}]}]
    bound = _verified_bound(m, ds, REFUSED, phases=phases,
                            top={"attention": "softmax", "theorem": "1.8", "tau_star": "1"})
    if bound is None:
        return
    # the float run, every operation rounded to nearest (every value here is an exact dyadic)
    X = [xa, xl]
    outs = []
    for xi in X:
        t = [_fl(_fl(xi[2] + xi[3]) * _fl(K * xj[2])) for xj in X]  # (v·x̂_i)(u·x̂_l), τ = 1
        assert [_fl(z - max(t)) for z in t] == [0, -K]
        w = [F(1), 2 * P(-1074)]  # exp(0) = 1; exp(-2048) ≈ 1e-890 → 2·tiny, within 2 ulps
        S = _fl(w[0] + w[1])
        p = [_fl(wi / S) for wi in w]
        mh = [_fl(_fl(p[0] * X[0][k]) + _fl(p[1] * X[1][k])) for k in range(4)]
        outs.append((_fl(mh[0] + mh[1]), F(0), F(0), F(0)))  # ρ = 0, V = e1 (x1 + x2)ᵀ
    seen = F(0)
    for x in outs:  # the snap, then ρ = 1, V = 0
        h = [max(F(0), _fl(x[0] - p)) for p in bp]
        z = [_fl(x[i] + sum(_fl(W[i][k] * h[k]) for k in range(4))) for i in range(4)]
        seen = max(seen, *(abs(a - b) for a, b in zip(z, y)))
    assert seen <= bound, f"verify accepted bound {float(bound):.3g}, the float run misses by {float(seen):.3g}"


# 15. A = 0 as stored, scores in the form scale·⟨x̂_i, x̂_l⟩: the float run
#     forms ⟨x̂_i, x̂_l⟩ = 2^1024 = inf and 0·inf = NaN, while the analysis
#     checked that dot product only for a scale ≠ 0 and took the scores as
#     exact zeros (hardmax: the uniform mean; softmax: equal weights).
# fixed: "⟨x̂_i, x̂_l⟩ is range-checked whatever the scale"
@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
def test_zero_scale_times_overflowing_dot_product(attention):
    toks = [(P(512), 0), (P(512), P(511))]
    m = {"format": "tfcert.model/1", "d": 2, "attention": attention, "blocks": [block(2, rho=0, A=lr(0), V=lr(1))]}
    if attention == "softmax":
        m["temperature"] = "1"
    ds = {"format": "tfcert.dataset/1", "d": 2, "pairs": [{"input": [[s(v) for v in t] for t in toks],
                                                           "output": [[s(P(512)), s(P(510))]]}]}
    if attention == "softmax":  # a softmax certificate needs τ* and snaps: the analysis alone
        model, dataset = read_model(parse_document("m", dumps(m))), read_dataset(parse_document("d", dumps(ds)))
        (fb,) = audit(model, dataset, floats=("binary64",)).floats
        bound = fb.bound if proves(fb, REFUSED) else None
    else:
        bound = _verified_bound(m, ds, REFUSED,
                                phases=[{"name": "final", "blocks": [0, 1], "claims": [{"kind": "exact"}]}],
                                top={"attention": attention, "theorem": "1.6"})
    if bound is None:
        return
    X = np.array([[float(v) for v in t] for t in toks])
    with np.errstate(all="ignore"):
        S = np.float64(0.0) * (X @ X.T)
        if attention == "hardmax":
            Pm = (S == S.max(axis=1, keepdims=True)).astype(np.float64)
        else:
            Pm = np.exp(S - S.max(axis=1, keepdims=True))
        out = np.float64(0.0) * X + (Pm / Pm.sum(axis=1, keepdims=True)) @ X
    assert np.isfinite(out).all(), f"float run gives {out[0]}, certified bound {float(bound):.3g}"


# 16. A hardmax A (or V, with ρ = 1) that is the zero matrix but not stored as
#     0 (I + (−1/3, 0)(3, 0)ᵀ + (0, −1/3)(0, 3)ᵀ): the replay takes the layer as
#     uniform (or the identity) and records no attention; the analysis indexed
#     it and died with a TypeError. The float products need not be exact zeros
#     (1/3 is not a float), so the analysis must refuse, with a message.
# fixed: "attention zero but not stored as 0: refused, not a crash"
@pytest.mark.parametrize("which", ["A", "V"])
def test_zero_matrix_not_stored_as_zero_is_refused_not_a_crash(which):
    third = F(1, 3)
    zero = lr(1, [((-third, 0), (3, 0)), ((0, -third), (0, 3))])
    blk = block(2, rho=0, A=zero, V=lr(1)) if which == "A" else block(2, rho=1, A=lr(1), V=zero)
    model, dataset = make(2, [blk], [[(1, 0), (0, 1)]])
    (fb,) = audit(model, dataset, floats=("binary64",)).floats
    assert fb.failure is not None and f"{which} is the zero matrix but not stored as 0" in fb.failure


# 17. A temperature that rounds to 0 in the format (2^-30 in binary16), with
#     ρ = 1 and V = 0 as stored and scores that are all 0: the float run's
#     s/τ̂ = 0/0 is NaN, so are the weights, and V m = 0·NaN = NaN. The fast
#     analysis's div returned 0 for 0/0 without dividing, passed the range
#     check of s/τ̂ and proved the bound 0; the rational analysis refuses.
# fixed: "div(0, 0) returned 0: a temperature rounding to 0 passed"
@pytest.mark.parametrize("fmt,tau,A", [("binary16", P(-30), lr(0)), ("binary64", P(-1100), lr(0)),
                                       ("binary16", P(-30), lr(1))])
def test_temperature_rounding_to_zero_is_refused(fmt, tau, A):
    m = {"format": "tfcert.model/1", "d": 2, "attention": "softmax", "temperature": s(tau),
         "blocks": [block(2, A=A)]}
    ds = {"format": "tfcert.dataset/1", "d": 2, "pairs": [{"input": [["0", "0"]], "output": [["0", "0"]]}]}
    model, dataset = read_model(parse_document("m", dumps(m))), read_dataset(parse_document("d", dumps(ds)))
    assert round_nearest(model.temperature, FORMATS[fmt]) == 0
    (fb,) = audit(model, dataset, floats=(fmt,)).floats
    with np.errstate(all="ignore"):
        z = np.float64(0.0) / np.float64(0.0)                 # s/τ̂ = 0/0
        out = 1.0 * 0.0 + 0.0 * (np.exp(z - z) / np.exp(z - z))  # x + V m with V = 0
    assert not np.isfinite(out)
    assert fb.failure is not None, f"the float run gives {out}, certified bound {fb.bound}"
    assert f"the temperature rounds to 0 in {fmt}" in fb.failure  # said plainly, not a division by zero


# 18–20. Softmax weights relative to an exact argmax a (the pair bound ω_l and H = Σ p_k ζ_k): no hole
# found; these are the strongest attacks, each run by tests/softmax_adversary.py in every score form,
# order, normalisation and with every exp pushed to either end of its 2 ulps, against the analysis's
# own per-token bounds (what later layers are fed), not only the final claim. The query's error is
# made real and large: an FF unit computes y = x_1 − 1 exactly (Sterbenz) from an input x_1 = 1 + f·2^-p
# rounded to 1 + 2^-p, so ŷ − y is the input's rounding, a relative error near 1/3, and the analysis
# bounds it within a few u. Scores c·y_i·k_l (A = c e_3 e_2ᵀ, exact): the float scores are the k_l
# themselves, exactly, while the exact ones are f·k_l.
def _amplified(p: int, frac, K, kl, L, sh: int = 0):
    from softmax_adversary import model
    ff = ([(1, 0, 0, 0)], [-1], [[0], [1], [0], [0]])
    return (model(4, 0, [((0, 0, P(p - sh), 0), (0, 1, 0, 0))], P(-sh), ff),
            [(1 + frac * P(-p), 0, 0, 0), (0, 0, K, 0), (0, 0, kl, L)])


# 18. The unique-argmax path with a far token l whose weight the query's error multiplies by e^θ:
#     binary32, exact gap z_a − z_l = 35, float gap 25 (θ = 10 = the pair's ω_l up to its rounding
#     terms); the mean's payload coordinate reaches 0.9999 of its bound (the bound holds). binary16:
#     float gap 16, the weight e^-16 ≈ 1.9 subnormal spacings (exp pushed by 2 spacings, the division
#     underflowing): 0.62 of its bound.
@pytest.mark.parametrize("fmt,p,K,kl,L,sh,reach", [("binary32", 23, 40, 15, 1, 0, F(99, 100)),
                                                   ("binary16", 10, 16, 0, 64, 2, F(1, 2))])
def test_softmax_far_weight_amplified_by_the_query_error(fmt, p, K, kl, L, sh, reach):
    from softmax_adversary import ratios
    r = ratios(*_amplified(p, F(7, 5) if fmt == "binary32" else F(5, 4), K, kl, L, sh), fmt, rows=[0], coords=[3])
    assert max(r.values()) <= 1, {k: v for k, v in r.items() if v > 1}
    assert r[0, 3] >= reach, f"the attack is no longer at the edge of the bound ({r[0, 3]:.3g})"


# 19. An exact tie (no unique argmax: the H path alone) that the query's error breaks: scores
#     c(y_i k_l + w_i j_l) with s_a = s_b exactly, x_b − x_a orthogonal to A x_i but not to
#     Â x̂_i − A x_i (θ_b = −1/8); binary32. The run reaches 0.29 of the payload's bound (the
#     bound's 1/(1 − H) and R ≥ 1 − H leave about a factor 3 there).
def test_softmax_tie_broken_by_the_query_error():
    from softmax_adversary import model, ratios
    c, ff = P(23), ([(1, 0, 0, 0, 0, 0)], [-1], [[0], [1], [0], [0], [0], [0]])
    A = [((0, 0, c, 0, 0, 0), (0, 1, 0, 0, 0, 0)), ((0, 0, 0, c, 0, 0), (0, 0, 0, 0, 0, 1))]
    seq = [(1 + F(65, 64) * P(-23), 0, 0, 0, 0, P(-23)), (0, 0, 0, F(65, 8), 0, 0), (0, 0, 8, 0, 1, 0)]
    r = ratios(model(6, 0, A, 1, ff), seq, "binary32", rows=[0], coords=[4])
    assert max(r.values()) <= 1, {k: v for k, v in r.items() if v > 1}
    assert r[0, 4] >= F(1, 5)


# 20. The amplified far weight over formats, query errors, gaps, payloads and temperatures.
@settings(max_examples=12, deadline=None)
@given(st.sampled_from([("binary32", 23, 0), ("binary16", 10, 2), ("bfloat16", 7, 0)]),
       st.fractions(F(1, 10), F(9, 10)), st.integers(4, 40), st.integers(0, 30), st.sampled_from([1, 3, 64]),
       st.sampled_from(ORDERS_EMU))
def test_softmax_amplified_weights_stay_within_the_bound(fmt_p, f, K, gap, L, order):
    from softmax_adversary import FORMS, analysis, ratios
    fmt, p, sh = fmt_p
    if f == F(1, 2):
        return  # a tie in the input's rounding
    model, seq = _amplified(p, 1 + f, K, K - gap, L, sh)
    if analysis(model, seq, fmt).failure is not None:
        return
    r = ratios(model, seq, fmt, rows=[0], coords=[3], forms=FORMS, orders=(order,))
    assert max(r.values()) <= 1, {k: v for k, v in r.items() if v > 1}


# 21. The attention mean's magnitude bound, by which the attention output's rounding is scaled
#     (_sa_out), left out the mean's own rounding: Σ p̂_l |x̂_l| without its (1 + γ) where every
#     weight's error is bounded by H, and without the products' underflow in either path. binary16,
#     one query a (token 0) of weight 1 in front of 63 tokens of one group (equal keys) at weight
#     e^-7.625 ≈ 0.998u each: each vanishes from Σ ê (below half an ulp of 1) and then rounds the
#     weighted sum up by nearly half an ulp, |m̂| = 1 + 126u against a bound of 1 + 92u; and a payload
#     of 3 subnormal spacings at weight 0.18 whose product rounds up to one spacing (bound 0.56 of one).
#     The first run's error also reaches 0.85 of its bound (the mean's and Σ ê's roundings realised).
@pytest.mark.parametrize("keys,payloads,reach", [
    ([0] + [F(-61, 8)] * 63, [1] + [1 + F(16 + j, 1024) for j in range(63)], F(4, 5)),
    ([0, F(-3, 2)], [0, 3 * P(-24)], F(0))])
def test_softmax_mean_magnitude_counts_its_rounding(keys, payloads, reach):
    from softmax_adversary import model, ratios
    seq = [(k, 1 if i == 0 else 0, x) for i, (k, x) in enumerate(zip(keys, payloads))]
    r = ratios(model(3, 0, [((1, 0, 0), (0, 1, 0))], 1), seq, "binary16", rows=[0], coords=[2], forms=("lr_q",))
    assert max(r.values()) <= 1, {k: v for k, v in r.items() if v > 1}
    assert r[0, 2] >= reach


# 22. Case 21's construction as the strongest attack on the softmax mean's error bound: binary32,
#     128 tokens, keys 4360905/2^18 (the least binary32 number above 24 ln 2, so each far weight is
#     just below u), payloads 1 + (32 + j)·2^-23. Both roundings the bound counts by γ_{n+2} are
#     realised almost in full — Σ ê loses every far weight (p̂_a = 1 against p_a ≈ 1 − 127u) and the
#     weighted sum gains nearly u at each of its 127 additions — and the run reaches 0.95 of the
#     token's bound (0.98 with 256 tokens, 0.99 with 512: the bound's constant terms, ζ_a, H and V's
#     rounding, are what is left).
def test_softmax_mean_error_realised_to_the_edge():
    from softmax_adversary import model, ratios
    n, key = 128, F(4360905, 2 ** 18)
    with ctx.workprec(100):
        assert arb(fmpq(key.numerator, key.denominator)) > 24 * arb(2).log()  # e^-key < u = 2^-24
    seq = [(0, 1, 1)] + [(-key, 0, 1 + F(32 + j, 2 ** 23)) for j in range(n - 1)]
    r = ratios(model(3, 0, [((1, 0, 0), (0, 1, 0))], 1), seq, "binary32", rows=[0], coords=[2], forms=("lr_q",),
               orders=("forward",))
    assert max(r.values()) <= 1, {k: v for k, v in r.items() if v > 1}
    assert r[0, 2] >= F(19, 20), f"the attack is no longer at the edge of the bound ({r[0, 2]:.3g})"


# 23. The score form that forms Âᵀ x̂_l first (docs/float.md allows it, as it allows Â x̂_i first):
#     A = u vᵀ with u = (1, 0), v = (0, 2^14), tokens (8, 1/16) and (4, 1/16). Â x̂_i = (x̂_i2·2^14, 0)
#     = (1024, 0) is small, but Âᵀ x̂_l = (0, 2^14·x̂_l1) = (0, 131072) overflows binary16: both scores
#     are inf, the tokens tie, and the hardmax averages them (error 2). Only |Â|·X was range-checked,
#     so the analysis proved a bound of 0 (binary32: v = (0, 2^126), second coordinates 2^-62).
# fixed: "the transposed score product Âᵀ x̂_l is never range-checked" (red team, 2026-12-04)
@pytest.mark.parametrize("fmt,dtype,big,small,first", [("binary16", np.float16, 14, -4, 8),
                                                        ("binary32", np.float32, 126, -62, 6),
                                                        ("bfloat16", None, 126, -62, 6)])
def test_transposed_score_product_overflow(fmt, dtype, big, small, first):
    toks = [(first, P(small)), (4, P(small))]
    model, dataset = make(2, [block(2, rho=0, A=lr(0, [((1, 0), (0, P(big)))]), V=lr(1))], [toks])
    (fb,) = audit(model, dataset, floats=(fmt,)).floats
    assert fb.bound is None and "Aᵀ times a token may overflow" in fb.failure
    if dtype is None:
        return
    with np.errstate(all="ignore"):  # the run the refusal stands for: Âᵀ x̂_l first, every score inf
        x = [np.array(t, dtype=dtype) for t in toks]
        At = np.array([[0, 0], [P(big), 0]], dtype=dtype)  # Âᵀ = v uᵀ
        scores = [float((At @ y) @ x[0]) for y in x]
    assert scores == [np.inf, np.inf]
