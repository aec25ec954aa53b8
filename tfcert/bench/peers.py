"""What ``tfcert bench`` measures tfcert against, and the untimed columns beside it: the dense
float64 forward pass a user would otherwise run, the naive exact replay of every layer on every
token, and the float columns (conditioning, certified and observed float error). The phases
(benchphase.py) run these in processes of their own; bench.py drives the phases and reads back
what they print, so neither of the two imports the other's caller.
"""
from __future__ import annotations

import json
from fractions import Fraction
from typing import Iterable

import numpy as np
from flint import fmpq, fmpq_mat

from tfcert.errors import InputError

OBSERVE_LIMIT = 2 * 10**6  # token-layers up to which the untimed float runs and token bits are measured


# ---------------------------------------------------------------- the float64 peer

def _float(s) -> float:
    """A number of the model format as float64, correctly rounded (int / int is)."""
    if isinstance(s, str) and "/" in s:
        p, q = s.split("/")
        return int(p) / int(q)
    return float(s)


def _matrix(m: dict, d: int) -> np.ndarray:
    out = _float(m["scale"]) * np.eye(d)
    for term in m["low_rank"]:
        out += np.outer([_float(x) for x in term["u"]], [_float(x) for x in term["v"]])
    return out


def dense_forward(model_raw: bytes, dataset_raw: bytes) -> list[np.ndarray]:
    """The peer: read model.json and dataset.json as a framework user would
    (JSON, each number to float64) and run every layer on every token in
    float64 — hardmax; sequences of one length batched into one (B, n, d)
    array; an attention whose V is 0 and ρ = 1 skipped (it adds exactly 0).
    Returns the output of each pair, in file order."""
    model, pairs = json.loads(model_raw), json.loads(dataset_raw)["pairs"]
    d = model["d"]
    sequences = [np.array([[_float(v) for v in t] for t in p["input"]]).reshape(len(p["input"]), d) for p in pairs]
    batches: dict[int, list[int]] = {}
    for j, x in enumerate(sequences):
        batches.setdefault(len(x), []).append(j)
    stacks = [np.stack([sequences[j] for j in idx]) for idx in batches.values()]
    for block in model["blocks"]:
        ff, sa = block["ff"], block["sa"]
        U = np.array([[_float(v) for v in r] for r in ff["U"]]).reshape(len(ff["U"]), d)
        b = np.array([_float(v) for v in ff["b"]])
        W = np.array([[_float(v) for v in r] for r in ff["W"]]).reshape(d, len(ff["U"]))
        eta = _float(ff["eta"])
        stacks = [eta * X + np.maximum(X @ U.T + b, 0) @ W.T for X in stacks]
        rho = _float(sa["rho"])
        if rho == 1 and _float(sa["V"]["scale"]) == 0 and not sa["V"]["low_rank"]:
            continue
        A, V = _matrix(sa["A"], d), _matrix(sa["V"], d)
        out = []
        for X in stacks:
            S = X @ A.T @ X.transpose(0, 2, 1)
            P = (S == S.max(axis=2, keepdims=True)).astype(float)
            P /= P.sum(axis=2, keepdims=True)
            out.append(rho * X + P @ X @ V.T)
        stacks = out
    result: list = [None] * len(sequences)
    for idx, X in zip(batches.values(), stacks):
        for j, x in zip(idx, X):
            result[j] = x
    return result


# ---------------------------------------------------------------- the naive exact replay

SCORE_ROWS = 256  # score rows formed at once: memory stays O(SCORE_ROWS · n) for long sequences


def _q(value) -> fmpq:
    """A number of the files as a FLINT rational (via Fraction: "p/q", decimals, integers)."""

    f = Fraction(str(value))
    return fmpq(f.numerator, f.denominator)


def _dense_q(m: dict, d: int) -> fmpq_mat:
    """scale·I + Σ u vᵀ as a dense d×d rational matrix."""

    out = fmpq_mat(d, d, [_q(m["scale"]) if i == k else 0 for i in range(d) for k in range(d)])
    for term in m["low_rank"]:
        out += fmpq_mat(d, 1, [_q(v) for v in term["u"]]) * fmpq_mat(1, d, [_q(v) for v in term["v"]])
    return out


def _token_bits(flat: list) -> tuple[int, int]:
    return max((x.p.bit_length() for x in flat), default=0), max((x.q.bit_length() for x in flat), default=0)


def _more_bits(bits: tuple[int, int] | None, flat: list) -> tuple[int, int] | None:
    """The running maxima of the bits, when they are being noted (None: not)."""
    return None if bits is None else tuple(map(max, bits, _token_bits(flat)))


def _naive_ff(ff: dict, flat: list, d: int) -> list:
    """η x + W relu(U x + b) for every token: one (Σn × d) rational matrix."""

    X = fmpq_mat(len(flat) // d, d, flat)
    out = X * _q(ff["eta"])
    width = len(ff["U"])
    if width:
        U = fmpq_mat(width, d, [_q(v) for row in ff["U"] for v in row])
        W = fmpq_mat(d, width, [_q(v) for row in ff["W"] for v in row])
        b = [_q(v) for v in ff["b"]]
        zero = fmpq(0)
        hidden = [max(h + b[k % width], zero) for k, h in enumerate((X * U.transpose()).entries())]
        out += fmpq_mat(X.nrows(), width, hidden) * W.transpose()
    return out.entries()


def _naive_sa(sa: dict, flat: list, lengths: list[int], d: int) -> list:
    """ρ x_i + V · mean of the argmax set, per sequence, from every exact
    score ⟨A x_i, x_l⟩ (n² of them per sequence)."""

    At, Vt, rho = _dense_q(sa["A"], d).transpose(), _dense_q(sa["V"], d).transpose(), _q(sa["rho"])
    out, start = [], 0
    for n in lengths:
        rows = flat[start * d:(start + n) * d]
        start += n
        X = fmpq_mat(n, d, rows)
        keys, queries = X.transpose(), (X * At).entries()
        means = []
        for first in range(0, n, SCORE_ROWS):
            k = min(SCORE_ROWS, n - first)
            scores = (fmpq_mat(k, d, queries[first * d:(first + k) * d]) * keys).entries()
            for i in range(k):
                row = scores[i * n:(i + 1) * n]
                best = max(row)
                argmax = [l for l, v in enumerate(row) if v == best]
                means += [sum((rows[l * d + c] for l in argmax), fmpq(0)) / len(argmax) for c in range(d)]
        out += (X * rho + fmpq_mat(n, d, means) * Vt).entries()
    return out


def naive_replay(model_raw: bytes, dataset_raw: bytes, track_bits: bool = False) -> tuple[list[set], tuple | None]:
    """What exact verification costs without tfcert's shortcuts: every FF
    layer on every token, every attention from its dense n×n exact scores
    (FLINT rational matrices straight from the files; an attention with ρ = 1
    and V = 0 is skipped, as the float64 peer skips it: it adds exactly 0).
    Returns each sequence's output set and, with ``track_bits``, the largest
    numerator and denominator bits of any token after any layer (a pass over
    every token per layer: kept out of the timed run)."""

    model, pairs = json.loads(model_raw), json.loads(dataset_raw)["pairs"]
    if model["attention"] != "hardmax":
        raise InputError("the naive replay runs hardmax models only")
    d = model["d"]
    lengths = [len(p["input"]) for p in pairs]
    flat = [_q(v) for p in pairs for t in p["input"] for v in t]
    bits = _token_bits(flat) if track_bits else None
    for block in model["blocks"]:
        flat = _naive_ff(block["ff"], flat, d)
        bits = _more_bits(bits, flat)
        sa = block["sa"]
        if not (_q(sa["rho"]) == 1 and _dense_q(sa["V"], d) == fmpq_mat(d, d)):
            flat = _naive_sa(sa, flat, lengths, d)
            bits = _more_bits(bits, flat)
    outputs, start = [], 0
    for n in lengths:
        outputs.append({tuple(flat[(start + i) * d:(start + i + 1) * d]) for i in range(n)})
        start += n
    return outputs, bits


def interpolates(outputs: list[set], dataset_raw: bytes) -> bool:
    """Whether every output set equals its target set, exactly."""
    pairs = json.loads(dataset_raw)["pairs"]
    return all(out == {tuple(_q(v) for v in y) for y in p["output"]} for out, p in zip(outputs, pairs))


# ---------------------------------------------------------------- the float columns

def parameters_of(model) -> Iterable:
    """Every stored number of a model (as fmpq)."""
    for blk in model.blocks:
        yield from (blk.ff.eta, *blk.ff.b, *(x for r in (*blk.ff.U, *blk.ff.W) for x in r), blk.sa.rho)
        for mtx in (blk.sa.A, blk.sa.V):
            yield from (mtx.scale, *(c for u, v in mtx.terms for c in (*u, *v)))


def float_columns(model, dataset, cert: dict, observe: bool = True) -> dict:
    """Conditioning and float fidelity: the largest |weight|, the least hat
    margin and argmax gap, the certified binary64/binary32 bounds (absolute
    and over 1 + max|y|), and — with ``observe`` — the deviation a numpy run
    shows in its own and in a reversed accumulation order: max-norm Hausdorff
    distance of each output set from its target set, measured in float64."""
    from tfcert.bench.floatrun import forward

    claims = [c for ph in cert["phases"] for c in ph["claims"]]
    margins = [Fraction(c["margin"]) for c in claims if c["kind"] == "hat" and c["margin"] is not None]
    gaps = [Fraction(g) for c in claims if c["kind"] == "argmax"
            for seq in c["tokens"] for _, g in seq if g is not None]
    bounds = {c["format"]: Fraction(c["bound"]) for c in claims if c["kind"] == "float"}
    scale = 1 + max(abs(float(v)) for p in dataset.pairs for y in p.output for v in y)
    out = {"max_weight": float(max(abs(w) for w in parameters_of(model))),
           "least_hat_margin": float(min(margins)) if margins else None,
           "least_argmax_gap": float(min(gaps)) if gaps else None}
    targets = [np.array([[float(v) for v in y] for y in p.output]) for p in dataset.pairs]
    for fmt in ("binary64", "binary32"):
        bound = bounds.get(fmt)
        out[f"{fmt}_bound"] = None if bound is None else float(bound)
        out[f"{fmt}_bound_rel"] = None if bound is None else float(bound) / scale
        with np.errstate(all="ignore"):
            for order in ("numpy", "reverse"):
                seen = None
                if observe:
                    outs = forward(model, [p.input for p in dataset.pairs], fmt, order)
                    seen = max(hausdorff(o.astype(np.float64), y) for o, y in zip(outs, targets))
                out[f"{fmt}_observed_{order}"] = seen if seen is not None and np.isfinite(seen) else None
    return out


def hausdorff(a: np.ndarray, b: np.ndarray) -> float:
    """Max-norm Hausdorff distance between two finite sets of rows (inf for non-finite rows)."""
    if not np.isfinite(a).all():
        return float("inf")
    dist = np.abs(a[:, None, :] - b[None, :, :]).max(axis=2)
    return float(max(dist.min(axis=1).max(), dist.min(axis=0).max()))
