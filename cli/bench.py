"""``tfcert bench``: exact certification against a dense float64 forward pass
of the same model, measured in one run and reported as ratios (absolute
seconds depend on the machine; ratios travel)."""
from __future__ import annotations

import json
import random
import time

import numpy as np

from tfcert.construct.build import certificate, construct, model_bytes
from tfcert.verify.check import verify
from tfcert.verify.claims.size import parameters
from tfcert.verify.formats import Model, dumps, parse_document, read_dataset

SHAPES = {"quick": [(10, 8, 2, 8)], "full": [(10, 8, 2, 8), (100, 20, 3, 20), (30, 20, 20, 24)]}


def random_dataset(n_seq: int, n: int, m: int, d: int, seed: int = 0) -> bytes:
    """A reproducible dataset of small integers (so tokens are shared across sequences)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n_seq):
        tokens: dict[tuple, None] = {}
        while len(tokens) < n:
            tokens[tuple(rng.randint(-5, 5) for _ in range(d))] = None
        pairs.append({"input": [list(map(str, t)) for t in tokens],
                      "output": [[str(rng.randint(-9, 9)) for _ in range(d)] for _ in range(m)]})
    return dumps({"format": "tfcert.dataset/1", "d": d, "pairs": pairs})


def dense_forward(model: Model, sequences: list[np.ndarray]) -> list[np.ndarray]:
    """The float64 forward pass every layer on every token, as a framework would run it."""
    d = model.d
    for block in model.blocks:
        ff, sa = block.ff, block.sa
        U = np.array([[float(v) for v in r] for r in ff.U]).reshape(len(ff.U), d)
        b = np.array([float(v) for v in ff.b])
        W = np.array([[float(v) for v in r] for r in ff.W]).reshape(d, len(ff.U))
        A, V = (float(m.scale) * np.eye(d) + sum((np.outer([float(x) for x in u], [float(x) for x in v])
                                                 for u, v in m.terms), np.zeros((d, d))) for m in (sa.A, sa.V))
        out = []
        for X in sequences:
            X = float(ff.eta) * X + np.maximum(X @ U.T + b, 0) @ W.T
            S = X @ A.T @ X.T
            P = (S == S.max(axis=1, keepdims=True)).astype(float)
            P /= P.sum(axis=1, keepdims=True)
            out.append(float(sa.rho) * X + P @ X @ V.T)
        sequences = out
    return sequences


def measure(shape: tuple[int, int, int, int]) -> dict:
    raw = random_dataset(*shape)
    dataset_doc = parse_document("dataset.json", raw)
    dataset = read_dataset(dataset_doc)
    start = time.perf_counter()
    construction = construct(dataset)
    model = model_bytes(construction.model)
    cert = dumps(certificate(construction, dataset, model, raw))
    t_construct = time.perf_counter() - start
    start = time.perf_counter()
    report = verify(parse_document("model.json", model), dataset_doc, parse_document("certificate.json", cert))
    t_verify = time.perf_counter() - start
    inputs = [np.array([[float(v) for v in t] for t in p.input]) for p in dataset.pairs]
    start = time.perf_counter()
    dense_forward(construction.model, inputs)
    t_float = time.perf_counter() - start
    n_seq, n, m, d = shape
    return {"N": n_seq, "n": n, "m": m, "d": d, "blocks": len(construction.model.blocks),
            "claims": len(report.results), "verified": report.ok,
            "construct_s": round(t_construct, 3), "verify_s": round(t_verify, 3),
            "float64_forward_s": round(t_float, 4), "verify_over_float64": round(t_verify / t_float, 2)}


def width_tradeoff(shape: tuple[int, int, int, int]) -> list[dict]:
    """Blocks and parameters as --width packs more hats into each FF layer
    (3 units a hat; width 3·Σm is effectively unbounded: L = 3 + bumps)."""
    dataset = read_dataset(parse_document("dataset.json", random_dataset(*shape)))
    rows = []
    for width in (3, 6, 12, 48, 3 * dataset.total_outputs):
        model = construct(dataset, "hardmax", width).model
        rows.append({"width": width, "blocks": len(model.blocks),
                     "parameters": parameters(model)})
    return rows


def run_bench(quick: bool, as_json: bool) -> int:
    rows = []
    for shape in SHAPES["quick" if quick else "full"]:
        rows.append(measure(shape))
        if not as_json:
            r = rows[-1]
            print(f"N={r['N']:>3} n={r['n']:>2} m={r['m']:>2} d={r['d']:>2}: blocks {r['blocks']:>4}, "
                  f"construct {r['construct_s']:.2f}s, verify {r['verify_s']:.2f}s "
                  f"({'ok' if r['verified'] else 'FAILED'}), float64 forward {r['float64_forward_s']:.3f}s, "
                  f"verify/float64 = {r['verify_over_float64']:.1f}x", flush=True)
    trade = width_tradeoff(SHAPES["quick"][0])
    if as_json:
        print(json.dumps({"results": rows, "width_tradeoff": trade}, indent=1))
    else:
        print("width trade-off (N=%d n=%d m=%d d=%d): " % SHAPES["quick"][0]
              + ", ".join(f"width {r['width']} → {r['blocks']} blocks, {r['parameters']} parameters" for r in trade))
    return 0 if all(r["verified"] for r in rows) else 1
