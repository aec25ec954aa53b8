"""The float survey of docs/float.md: which formats get a claim, and how large, on datasets of
every shape the assumptions allow, in both attentions.

Run: ``python tests/float_survey.py [--count K] [--out FILE] [--resume]``. Datasets are drawn
from a seeded generator (the same K datasets every run): integer, decimal and mixed-scale
coordinates; equal sequence means; shared tokens; subsets; collinear and cocircular tokens;
1–60 sequences, d = 2 … 64, at most 1000 tokens. Each (dataset, attention) is one JSON line
in FILE (default docs/results/float-survey.jsonl), written as it goes; ``--resume`` keeps the
lines there and runs the rest. The summary (per format: claims proven, worst bound relative
to 1 + max|y|) is printed at the end, and by ``--summary`` alone.

It is a benchmark, not a test: it takes about a minute per twenty datasets on one core."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "results" / "float-survey.jsonl"
KINDS = ("integer", "decimal", "mixed-scale", "equal-means", "shared", "subsets", "collinear", "cocircular")
SIZES = ((1, 50), (51, 150), (151, 1000))
LIMITS = {"binary64": 1e-9, "binary32": 1e-3, "binary16": 1e-1, "bfloat16": 1e-1}


def _coordinate(rng: np.random.Generator, kind: str) -> str:
    if kind == "decimal":
        return f"{rng.integers(-300, 300) / 100:.2f}"
    if kind == "mixed-scale":
        return f"{rng.integers(-9, 10)}e{rng.integers(-6, 7)}"
    return str(int(rng.integers(-5, 6)))


def _token(rng, kind: str, d: int) -> tuple[str, ...]:
    return tuple(_coordinate(rng, kind) for _ in range(d))


def dataset(seed: int) -> tuple[str, dict]:
    """The seed's dataset: (its kind, the dataset document)."""
    rng = np.random.default_rng(seed)
    kind = KINDS[seed % len(KINDS)]
    d = int(rng.choice([2, 2, 3, 4, 8, 16, 32, 64]))
    N = int(rng.integers(1, 61))
    per = max(1, min(int(rng.integers(1, 12)), 1000 // N))
    pool = [_token(rng, "integer", d) for _ in range(6)]
    pairs, seen = [], set()
    for j in range(N):
        n = int(rng.integers(1, per + 1))
        if kind == "collinear":
            X = [tuple(str((i + 1) * (j + 2)) if c == 0 else str(2 * (i + 1) * (j + 2)) if c == 1 else "0"
                       for c in range(d)) for i in range(n)]
        elif kind == "cocircular":  # rational points on the unit circle, ((1-t²)/(1+t²), 2t/(1+t²))
            ts = [Fraction(int(a), 97) for a in rng.choice(np.arange(1, 97), size=n, replace=False)]
            X = [tuple(str((1 - t * t) / (1 + t * t)) if c == 0 else str(2 * t / (1 + t * t)) if c == 1
                       else "0" for c in range(d)) for t in ts]
        elif kind == "shared" and pairs:
            X = list({*pool[:int(rng.integers(1, 4))], *(_token(rng, "integer", d) for _ in range(n))})
        elif kind == "subsets" and pairs and len(pairs[-1][0]) > 1:
            base = pairs[-1][0]
            X = base[:int(rng.integers(1, len(base)))]
        elif kind == "equal-means" and pairs:
            base = pairs[-1][0]  # the same mean: the tokens mirrored through their mean, shifted inside
            mean = [sum(Fraction(x[c]) for x in base) / len(base) for c in range(d)]
            X = [tuple(str(2 * mean[c] - Fraction(x[c])) for c in range(d)) for x in base]
        else:
            X = [_token(rng, kind if kind in ("decimal", "mixed-scale") else "integer", d) for _ in range(n)]
        X = list(dict.fromkeys(X))
        if frozenset(X) in seen:
            continue
        seen.add(frozenset(X))
        m = int(rng.integers(1, len(X) + 1))
        Y = list(dict.fromkeys(_token(rng, kind if kind in ("decimal", "mixed-scale") else "integer", d)
                               for _ in range(m)))
        pairs.append((X, Y))
    doc = {"format": "tfcert.dataset/1", "d": d,
           "pairs": [{"input": [list(x) for x in X], "output": [list(y) for y in Y]} for X, Y in pairs]}
    return kind, doc


def measure(seed: int, attention: str) -> dict:
    from tfcert.construct.bundle import build

    kind, doc = dataset(seed)
    tokens = sum(len(p["input"]) for p in doc["pairs"])
    top = max(abs(Fraction(v)) for p in doc["pairs"] for y in p["output"] for v in y)
    row = {"seed": seed, "kind": kind, "attention": attention, "d": doc["d"], "N": len(doc["pairs"]),
           "tokens": tokens}
    start = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ds.json"
        path.write_text(json.dumps(doc))
        try:
            bundle = build(path, attention)
        except Exception as e:  # noqa: BLE001 - a survey records what happened, whatever it was
            return {**row, "error": f"{type(e).__name__}: {e}"[:300]}
    cert = json.loads(bundle.files["certificate.json"])
    claims = {c["format"]: Fraction(c["bound"]) for c in cert["phases"][-1]["claims"] if c["kind"] == "float"}
    return {**row, "seconds": round(time.process_time() - start, 2),
            "relative": {f: float(b / (1 + top)) for f, b in sorted(claims.items())}}


def summary(rows: list[dict]) -> str:
    lines = [f"{len(rows)} constructions ({len({r['seed'] for r in rows})} datasets, both attentions)"]
    for attention in ("hardmax", "softmax"):
        mine = [r for r in rows if r["attention"] == attention]
        errors = [r for r in mine if "error" in r]
        lines.append(f"{attention}: {len(mine)} datasets, {len(errors)} not constructed")
        for fmt, limit in LIMITS.items():
            ok = [r for r in mine if fmt in r.get("relative", {})]
            within = [r for r in ok if r["relative"][fmt] <= limit]
            worst = max((r["relative"][fmt] for r in ok), default=None)
            lines.append(f"  {fmt:9s} claim on {len(ok):3d}, within {limit:g}·(1 + max|y|) on {len(within):3d}"
                         + ("" if worst is None else f", worst {worst:.1e}"))
        for lo, hi in SIZES:
            sized = [r for r in mine if lo <= r["tokens"] <= hi]
            got = sum("binary32" in r.get("relative", {}) for r in sized)
            lines.append(f"  {lo}–{hi} tokens: binary32 claim on {got} of {len(sized)}")
    return "\n".join(lines)


DTYPES = {"binary64": "float64", "binary32": "float32", "binary16": "float16", "bfloat16": "bfloat16"}


def examples() -> str:
    """A table per bundle of certificates/: each format's proven bound (relative to 1 + max|y|;
    "—": none) beside the deviation real runs show — numpy (its own order and a reversed
    accumulation; it has no bfloat16), the exported PyTorch module on the CPU and onnxruntime
    (float64 and float32 only), where those are installed."""
    import importlib.util

    import tfcert.export as tx
    from tfcert.bench.floatrun import DTYPES as NUMPY, deviation
    from tfcert.verify.evaluate import Replay
    from tfcert.verify.formats import parse_document, read_dataset, read_model

    torch = importlib.util.find_spec("torch") is not None
    onnx = importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None
    lines = ["bundle                 format    bound     numpy     reversed  torch     onnx"]
    for folder in sorted(p for p in (REPO / "certificates").iterdir() if p.is_dir()):
        model = read_model(parse_document(str(folder / "model.json"), (folder / "model.json").read_bytes()))
        data = read_dataset(parse_document(str(folder / "dataset.json"), (folder / "dataset.json").read_bytes()))
        cert = json.loads((folder / "certificate.json").read_text())
        claims = {c["format"]: Fraction(c["bound"]) for ph in cert["phases"] for c in ph["claims"] if c["kind"] == "float"}
        top = max(abs(Fraction(int(v.p), int(v.q))) for p in data.pairs for y in p.output for v in y)
        inputs = [p.input for p in data.pairs]
        replay = Replay(model, inputs)
        for _ in replay.steps():
            pass
        final = replay.sequences()

        def rel(value) -> str:
            if value is None or isinstance(value, str):
                return value or "—"
            return "inf" if value == float("inf") else f"{float(value) / float(1 + top):.1e}"

        for fmt in DTYPES:
            try:
                with np.errstate(all="ignore"):
                    seen = [deviation(model, inputs, final, fmt, order) if fmt in NUMPY else None
                            for order in ("numpy", "reverse")]
            except OverflowError:  # a parameter beyond the format's range
                seen = ["overflow", "overflow"]
            ran = None
            if torch:
                try:
                    ran = tx.max_deviation(tx.to_torch(model, DTYPES[fmt]), model, inputs)
                except Exception:  # noqa: BLE001 - a parameter that overflows the dtype
                    ran = "overflow"
            ort = None
            if onnx and fmt in ("binary64", "binary32"):
                import onnxruntime
                from tfcert.export.onnxgraph import to_onnx
                session = onnxruntime.InferenceSession(to_onnx(model, DTYPES[fmt]))
                ort = tx.max_deviation(session, model, inputs)
            lines.append(f"{folder.name:22s} {fmt:9s} {rel(claims.get(fmt)):9s} {rel(seen[0]):9s} {rel(seen[1]):9s} "
                         f"{rel(ran):9s} {rel(ort)}")
    lines.append("")
    lines.append("where no claim is made, why (tfcert audit --float FORMAT):")
    from tfcert.audit.audit import audit
    for folder in sorted(p for p in (REPO / "certificates").iterdir() if p.is_dir()):
        model = read_model(parse_document(str(folder / "model.json"), (folder / "model.json").read_bytes()))
        data = read_dataset(parse_document(str(folder / "dataset.json"), (folder / "dataset.json").read_bytes()))
        for bound in audit(model, data, floats=tuple(DTYPES)).floats:
            if bound.bound is None:
                lines.append(f"{folder.name} {bound.format}: {bound.failure}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--attention", choices=["hardmax", "softmax"], action="append",
                   help="only this attention (repeatable; default both)")
    p.add_argument("--summary", action="store_true", help="only summarise FILE")
    p.add_argument("--examples", action="store_true", help="only the bundles of certificates/ against real runs")
    args = p.parse_args(argv)
    if args.examples:
        print(examples())
        return 0
    rows = [json.loads(line) for line in args.out.read_text().splitlines()] if args.out.exists() and (
        args.resume or args.summary) else []
    if not args.summary:
        done = {(r["seed"], r["attention"]) for r in rows}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a" if args.resume else "w") as f:
            for seed in range(args.count):
                for attention in args.attention or ("hardmax", "softmax"):
                    if (seed, attention) in done:
                        continue
                    row = measure(seed, attention)
                    f.write(json.dumps(row, sort_keys=True) + "\n")
                    f.flush()
                    rows.append(row)
                    print(f"{seed:3d} {attention:7s} {row['kind']:11s} d={row['d']:2d} N={row['N']:2d} "
                          f"tokens={row['tokens']:4d} {row.get('relative', row.get('error'))}",
                          file=sys.stderr, flush=True)
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
