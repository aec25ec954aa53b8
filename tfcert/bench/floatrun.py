"""A float forward pass of a model in numpy, the way a framework runs it,
in a chosen evaluation order — the observed side of the float claim (the
bench and the tests compare it with the certified bound; the verifier never
runs floats).

Parameters and inputs are rounded to the dtype exactly (round to nearest
from the rational, never through float64 for float32). ``order``: "numpy"
(matmul and numpy's reductions), "forward" or "reverse" (every sum and dot
product accumulated one term at a time, first to last or last to first).
In float16, numpy's matmul and reductions (softmax's Σ exp too, in every
order) accumulate in float32 and round once: a wider accumulator, which the
float model does not cover (docs/float.md, "Not covered"), so a float16 run
here is not one of its runs; tests/floatforms.py emulates those exactly.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from tfcert.verify.floats import FORMATS, round_nearest
from tfcert.verify.formats import LowRank, Model

DTYPES = {"binary64": np.float64, "binary32": np.float32, "binary16": np.float16}  # numpy has no bfloat16


def rounded(q, fmt: str):
    r = round_nearest(q, FORMATS[fmt])
    return DTYPES[fmt](Fraction(int(r.p), int(r.q)))


def array(rows, fmt: str, shape=None) -> np.ndarray:
    out = np.array([[rounded(v, fmt) for v in r] for r in rows], dtype=DTYPES[fmt])
    return out.reshape(shape) if shape is not None else out


def vector(values, fmt: str) -> np.ndarray:
    return np.array([rounded(v, fmt) for v in values], dtype=DTYPES[fmt])


def dense(m: LowRank, d: int, fmt: str) -> np.ndarray:
    t = DTYPES[fmt]
    out = rounded(m.scale, fmt) * np.eye(d, dtype=t)
    for u, v in m.terms:
        out = out + np.outer(vector(u, fmt), vector(v, fmt)).astype(t)
    return out.astype(t)


def matmul(a: np.ndarray, b: np.ndarray, order: str) -> np.ndarray:
    """a @ b with the reduction in the given order."""
    if order == "numpy":
        return a @ b
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)
    steps = range(a.shape[1]) if order == "forward" else reversed(range(a.shape[1]))
    for k in steps:
        acc = acc + np.multiply.outer(a[:, k], b[k, :]).astype(a.dtype)
    return acc


def forward(model: Model, sequences, fmt: str, order: str = "numpy") -> list[np.ndarray]:
    """The model's float run. Feed-forward layers act on every token at once;
    an attention layer with ρ = 1 and V = 0 is skipped (x + 0 is x exactly)."""
    t = DTYPES[fmt]
    d = model.d
    lengths = [len(seq) for seq in sequences]
    X = np.vstack([array(seq, fmt, (len(seq), d)) for seq in sequences])
    tau = rounded(model.temperature, fmt) if model.temperature is not None else None
    for block in model.blocks:
        ff, sa = block.ff, block.sa
        U = array(ff.U, fmt, (len(ff.U), d))
        b = vector(ff.b, fmt)
        W = array(ff.W, fmt, (d, len(ff.U)))
        pre = matmul(np.hstack([X, np.ones((len(X), 1), dtype=t)]), np.vstack([U.T, b[None, :]]), order)
        X = matmul(np.hstack([X * rounded(ff.eta, fmt), np.maximum(pre, t(0))]),
                   np.vstack([np.eye(d, dtype=t), W.T]), order).astype(t)
        if sa.rho == 1 and sa.V.scale == 0 and not any(any(u) and any(v) for u, v in sa.V.terms):
            continue
        A, V, rho = dense(sa.A, d, fmt), dense(sa.V, d, fmt), rounded(sa.rho, fmt)
        out, start = [], 0
        for n in lengths:
            Y = X[start:start + n]
            start += n
            S = matmul(matmul(Y, A.T, order), Y.T, order)
            if model.attention == "hardmax":
                P = (S == S.max(axis=1, keepdims=True)).astype(t)
                P = P / P.sum(axis=1, keepdims=True)
            else:
                Z = np.exp(S / tau - (S / tau).max(axis=1, keepdims=True))
                P = Z / Z.sum(axis=1, keepdims=True)
            out.append((Y * rho + matmul(matmul(P.astype(t), Y, order), V.T, order)).astype(t))
        X = np.vstack(out)
    return np.split(X, np.cumsum(lengths)[:-1])


def deviation(model: Model, sequences, exact, fmt: str, order: str = "numpy") -> Fraction | float:
    """max |float − exact| over every coordinate of every final token, exactly
    (a Fraction: ``deviation(…) <= bound`` compares without a rounding that
    could lift a deviation equal to the bound above it); inf on NaN/inf."""
    worst = Fraction(0)
    for got, want in zip(forward(model, sequences, fmt, order), exact):
        for row, token in zip(got, want):
            for g, w in zip(row, token):
                if not np.isfinite(g):
                    return float("inf")
                worst = max(worst, abs(Fraction(float(g)) - Fraction(int(w.p), int(w.q))))
    return worst
