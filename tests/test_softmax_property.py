"""Softmax construction on random datasets, checked by the verifier and by an
independent dense forward pass in mpmath (80 digits) at τ* and τ*/7."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import mpmath
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from tfcert.construct.bundle import build

DIGITS = 80
TOLERANCE = mpmath.mpf(10) ** -40


def mp(x) -> mpmath.mpf:
    return mpmath.mpf(int(x.p)) / int(x.q)


def low_rank(m, x):
    out = [mp(m.scale) * xi for xi in x]
    for u, v in m.terms:
        c = mpmath.fsum(mp(a) * b for a, b in zip(v, x))
        out = [o + mp(a) * c for o, a in zip(out, u)]
    return out


def forward(model, tokens, tau):
    """A plain dense forward pass: FF then softmax SA, block by block."""
    X = [[mp(v) for v in x] for x in tokens]
    for block in model.blocks:
        ff, sa = block.ff, block.sa
        new = []
        for x in X:
            hidden = [max(mpmath.fsum(mp(a) * b for a, b in zip(row, x)) + mp(bias), 0)
                      for row, bias in zip(ff.U, ff.b)]
            new.append([mp(ff.eta) * xi + mpmath.fsum(mp(w) * h for w, h in zip(w_row, hidden))
                        for xi, w_row in zip(x, ff.W)])
        X = new
        out = []
        for x in X:
            ax = low_rank(sa.A, x)
            s = [mpmath.fsum(a * b for a, b in zip(ax, y)) / tau for y in X]
            top = max(s)
            w = [mpmath.exp(v - top) for v in s]
            z = mpmath.fsum(w)
            mean = [mpmath.fsum(wl * y[k] for wl, y in zip(w, X)) / z for k in range(len(x))]
            vm = low_rank(sa.V, mean)
            out.append([mp(sa.rho) * xi + v for xi, v in zip(x, vm)])
        X = out
    return X


def close(a, b) -> bool:
    return max(abs(p - mp(q)) for p, q in zip(a, b)) < TOLERANCE


small = st.fractions(min_value=-3, max_value=3, max_denominator=4)


@st.composite
def datasets(draw):
    d = draw(st.integers(2, 24))
    vec = st.lists(small, min_size=d, max_size=d).map(tuple)
    pool = draw(st.lists(vec, min_size=2, max_size=6, unique=True))
    pairs = []
    if draw(st.booleans()):  # two sequences sharing a token, with equal means
        c, v, w = pool[0], draw(vec), draw(vec)
        for delta in (v, w):
            seq = [c, tuple(a + b for a, b in zip(c, delta)), tuple(a - b for a, b in zip(c, delta))]
            assume(len(set(seq)) == 3)
            pairs.append(seq)
        assume(set(pairs[0]) != set(pairs[1]))
    for _ in range(draw(st.integers(0 if pairs else 1, 2))):
        pairs.append(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4, unique=True)))
    assume(len({frozenset(p) for p in pairs}) == len(pairs))
    out = []
    for seq in pairs:
        m = draw(st.sampled_from([1, len(seq), draw(st.integers(1, len(seq)))]))
        out.append(draw(st.lists(vec, min_size=m, max_size=m, unique=True)))
    text = lambda t: [str(x) for x in t]  # noqa: E731
    return {"format": "tfcert.dataset/1", "d": d,
            "pairs": [{"input": [text(t) for t in i], "output": [text(t) for t in o]} for i, o in zip(pairs, out)]}


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(datasets())
def test_softmax_interpolates_exactly_at_and_below_tau_star(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dataset.json"
        path.write_text(json.dumps(raw))
        bundle = build(path, "softmax")
    assert bundle.report.ok
    model = bundle.construction.model
    cert = json.loads(bundle.files["certificate.json"])
    assert cert["tau_star"] == str(model.temperature)
    with mpmath.workdps(DIGITS):
        for tau in (mp(model.temperature), mp(model.temperature) / 7):
            for pair in bundle.dataset.pairs:
                outputs = forward(model, pair.input, tau)
                assert all(any(close(x, y) for y in pair.output) for x in outputs)
                assert all(any(close(x, y) for x in outputs) for y in pair.output)
