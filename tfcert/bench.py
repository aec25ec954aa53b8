"""``tfcert bench``: exact certification against a dense float64 forward pass
of the same model, measured in one run and reported as ratios (absolute
seconds depend on the machine; ratios travel)."""
from __future__ import annotations

import json
import random
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from tfcert.construct.build import certificate, construct, model_bytes
from tfcert.errors import InputError
from tfcert.floatrun import forward
from tfcert.progress import Bar
from tfcert.report import json_text
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
    report = verify(parse_document("model.json", model), parse_document("dataset.json", raw),
                    parse_document("certificate.json", cert))  # from the bytes, as the peer reads them
    t_verify = time.perf_counter() - start
    start = time.perf_counter()
    dense_forward(model, raw)
    t_float = time.perf_counter() - start
    n_seq, n, m, d = shape
    return {"N": n_seq, "n": n, "m": m, "d": d, "blocks": len(construction.model.blocks),
            "claims": len(report.results), "verified": report.ok,
            "construct_s": round(t_construct, 3), "verify_s": round(t_verify, 3),
            "float64_forward_s": round(t_float, 4), "verify_over_float64": round(t_verify / t_float, 2),
            **float_columns(construction.model, dataset, json.loads(cert))}


def float_columns(model: Model, dataset, cert: dict) -> dict:
    """Conditioning and float fidelity: the largest |weight|, the least hat
    margin and argmax gap, the certified binary64/binary32 bounds (absolute
    and over 1 + max|y|), and the deviation a numpy run shows in its own and
    in a reversed accumulation order: max-norm Hausdorff distance of each
    output set from its target set, measured in float64."""
    weights = [abs(v) for blk in model.blocks for v in (
        blk.ff.eta, *blk.ff.b, *(x for r in (*blk.ff.U, *blk.ff.W) for x in r), blk.sa.rho,
        *(x for mtx in (blk.sa.A, blk.sa.V) for x in (mtx.scale, *(c for u, v in mtx.terms for c in (*u, *v)))))]
    claims = [c for ph in cert["phases"] for c in ph["claims"]]
    margins = [Fraction(c["margin"]) for c in claims if c["kind"] == "hat" and c["margin"] is not None]
    gaps = [Fraction(g) for c in claims if c["kind"] == "argmax" for row in c["tokens"] for _, g in row if g is not None]
    bounds = {c["format"]: Fraction(c["bound"]) for c in claims if c["kind"] == "float"}
    scale = 1 + max(abs(float(v)) for p in dataset.pairs for y in p.output for v in y)
    out = {"max_weight": float(max(weights)), "least_hat_margin": float(min(margins)) if margins else None,
           "least_argmax_gap": float(min(gaps)) if gaps else None}
    targets = [np.array([[float(v) for v in y] for y in p.output]) for p in dataset.pairs]
    for fmt in ("binary64", "binary32"):
        bound = bounds.get(fmt)
        out[f"{fmt}_bound"] = None if bound is None else float(bound)
        out[f"{fmt}_bound_rel"] = None if bound is None else float(bound) / scale
        with np.errstate(all="ignore"):
            for order in ("numpy", "reverse"):
                outs = forward(model, [p.input for p in dataset.pairs], fmt, order)
                seen = max(hausdorff(o.astype(np.float64), y) for o, y in zip(outs, targets))
                out[f"{fmt}_observed_{order}"] = seen if np.isfinite(seen) else None  # null: inf or NaN
    return out


def hausdorff(a: np.ndarray, b: np.ndarray) -> float:
    """Max-norm Hausdorff distance between two finite sets of rows (inf for non-finite rows)."""
    if not np.isfinite(a).all():
        return float("inf")
    dist = np.abs(a[:, None, :] - b[None, :, :]).max(axis=2)
    return float(max(dist.min(axis=1).max(), dist.min(axis=0).max()))


def width_tradeoff(shape: tuple[int, int, int, int]) -> list[dict]:
    """Blocks and parameters as --width packs more hats and snaps into each FF
    layer (4 units each; width 4·Σm is effectively unbounded)."""
    dataset = read_dataset(parse_document("dataset.json", random_dataset(*shape)))
    rows = []
    for width in (4, 8, 16, 48, 4 * dataset.total_outputs):
        model = construct(dataset, "hardmax", width).model
        rows.append({"width": width, "blocks": len(model.blocks),
                     "parameters": parameters(model)})
    return rows


def draw(rows: list[dict], trade: list[dict], out: Path) -> dict[str, str]:
    """scaling.png: seconds per shape for the three stages; width.png: blocks
    and parameters against --width."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{out}: cannot create: {exc.strerror or exc}") from None
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for key, label, marker in (("construct_s", "construct + certify", "o"), ("verify_s", "verify (exact)", "s"),
                               ("float64_forward_s", "dense float64 forward", "^")):
        ax.plot([r["claims"] for r in rows], [max(r[key], 1e-4) for r in rows], marker=marker, label=label)
    for r in rows:
        ax.annotate(f"N={r['N']} n={r['n']} m={r['m']} d={r['d']}", (r["claims"], r["verify_s"]),
                    textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set(xscale="log", yscale="log", xlabel="claims in the certificate", ylabel="seconds",
           title="tfcert bench: exact certification against a float64 pass")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "scaling.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    widths = [r["width"] for r in trade]
    lines = ax.plot(widths, [r["blocks"] for r in trade], marker="o", label="blocks")
    ax.set(xscale="log", xlabel="--width (FF units per layer)", ylabel="blocks")
    ax.set_xticks(widths, [str(w) for w in widths])
    ax.minorticks_off()
    twin = ax.twinx()
    lines += twin.plot(widths, [r["parameters"] for r in trade], marker="s", color="C1", label="parameters")
    twin.set_ylabel("parameters")
    ax.legend(handles=lines, fontsize=8, loc="upper right")
    ax.set_title("width trade-off (N=%d n=%d m=%d d=%d)" % SHAPES["quick"][0], fontsize=10)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(out / "width.png", dpi=110)
    plt.close(fig)
    return {"scaling": str(out / "scaling.png"), "width": str(out / "width.png")}


def float_line(r: dict) -> str:
    """One line per shape: the certified bounds beside what numpy shows (own order / reversed)."""
    parts = []
    for fmt in ("binary64", "binary32"):
        b, rel = r[f"{fmt}_bound"], r[f"{fmt}_bound_rel"]
        certified = "no bound" if b is None else f"≤ {b:.2g} ({rel:.2g} relative)"
        seen = " / ".join("non-finite" if v is None else f"{v:.2g}"
                          for v in (r[f"{fmt}_observed_numpy"], r[f"{fmt}_observed_reverse"]))
        parts.append(f"{fmt} {certified}, observed {seen}")
    return f"max|w| {r['max_weight']:.3g}; " + "; ".join(parts)


def run_bench(quick: bool, as_json: bool, out: str | Path = "tfcert-bench") -> int:
    rows = []
    shapes = SHAPES["quick" if quick else "full"]
    with Bar("bench", unit="shape") as bar:
        for i, shape in enumerate(shapes):
            bar(i, len(shapes), "N=%d n=%d m=%d d=%d" % shape)
            rows.append(measure(shape))
            if not as_json:
                r = rows[-1]
                print(f"N={r['N']:>3} n={r['n']:>2} m={r['m']:>2} d={r['d']:>2}: blocks {r['blocks']:>4}, "
                      f"construct {r['construct_s']:.2f}s, verify {r['verify_s']:.2f}s "
                      f"({'ok' if r['verified'] else 'FAILED'}), float64 forward {r['float64_forward_s']:.3f}s, "
                      f"verify/float64 = {r['verify_over_float64']:.1f}x", flush=True)
                print("    " + float_line(r), flush=True)
        bar(len(shapes), len(shapes), "width trade-off")
        trade = width_tradeoff(SHAPES["quick"][0])
    files = draw(rows, trade, Path(out))
    if as_json:
        print(json_text({"results": rows, "width_tradeoff": trade, "files": files}))
    else:
        print("width trade-off (N=%d n=%d m=%d d=%d): " % SHAPES["quick"][0]
              + ", ".join(f"width {r['width']} → {r['blocks']} blocks, {r['parameters']} parameters" for r in trade))
        print(f"wrote {files['scaling']} and {files['width']}")
    return 0 if all(r["verified"] for r in rows) else 1
