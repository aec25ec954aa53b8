"""The float survey of docs/float.md: which formats get a claim, and how large, on datasets of
every shape the assumptions allow, in both attentions.

Run: ``python tests/float_survey.py [--count K] [--first S] [--out FILE] [--resume]`` (seeds S … S + K − 1;
the held-out datasets: ``--first 1000 --out docs/results/float-heldout.jsonl``); ``--dataset SEED``
prints one seed's dataset, ``--data-limits`` what the data alone rules out in the narrow formats
(docs/results/float-data-limits.txt). Datasets are drawn from a seeded generator (the same K
datasets every run): integer, decimal and mixed-scale coordinates; equal sequence means; shared
tokens; subsets; collinear and cocircular tokens; 1–60 sequences, d = 2 … 64, at most 1000
tokens. Each (dataset, attention) is one JSON line in FILE (default
docs/results/float-survey.jsonl), written as it goes; ``--resume`` keeps the lines there and runs
the rest. Each line also holds numpy's float32 runs (and float16 runs, for at most 50 tokens),
their worst deviation relative to 1 + max|y|. The summary (per format: claims proven, worst bound
relative to 1 + max|y|; where no claim is within the limit, whether the runs miss it; where one is,
how close the runs come to the bound) is printed at the end, and by ``--summary`` alone.

``--attack``: where a binary32 bound is above 0 but numpy's runs stay below 0.01 of it, exact or
not (datasets of at most 50 tokens), the emulated attack of tests/floatforms.py (every score, V and normalisation form, forward,
reversed, fused and random orders, exp(0) anywhere within its 4u) adds its worst run to the line
(``attack``), relative to 1 + max|y|: how close a run the float model allows comes to the bound.

``--half-misses``: beside each missing half-precision claim of FILE (at most 50 tokens, none within
1e-1), the first run of that attack (its fixed forms, softmax's skewed runs, then 100 random ones)
that misses by more than 1e-1 or overflows in the residual stream (docs/results/float-half-misses.txt;
numpy's float16 runs accumulate in float32, a run the float model does not cover).

``--attack-binary16 SEED …``: the same attack in binary16 on those seeds' softmax models, beside
their binary16 bound (docs/results/scaled-copy-attack.txt).

``--examples``: the bundles of certificates/ against real float runs
(docs/results/float-examples.txt); ``--tables``: the measurement tables of tests/data/tables/,
built in both attentions, against real float runs (docs/results/float-tables.txt, about three
minutes on one core).

It is a benchmark, not a test: it takes about a minute per twenty datasets on one core."""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
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


def _value(token: tuple[str, ...]) -> tuple[Fraction, ...]:
    return tuple(Fraction(v) for v in token)


def _distinct(tokens: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The tokens without repeats of a value, the first of each kept, in order."""
    out, values = [], set()
    for x in tokens:
        if (v := _value(x)) not in values:
            values.add(v)
            out.append(x)
    return out


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
            X = [*pool[:int(rng.integers(1, 4))], *(_token(rng, "integer", d) for _ in range(n))]  # deduplicated below
        elif kind == "subsets" and pairs and len(pairs[-1][0]) > 1:
            base = pairs[-1][0]
            X = base[:int(rng.integers(1, len(base)))]
        elif kind == "equal-means" and pairs:
            base = pairs[-1][0]  # the same mean: the tokens mirrored through their mean, shifted inside
            mean = [sum(Fraction(x[c]) for x in base) / len(base) for c in range(d)]
            X = [tuple(str(2 * mean[c] - Fraction(x[c])) for c in range(d)) for x in base]
        else:
            X = [_token(rng, kind if kind in ("decimal", "mixed-scale") else "integer", d) for _ in range(n)]
        X = _distinct(X)  # by value: "0e3" is "0e-2"
        if frozenset(map(_value, X)) in seen:
            continue
        seen.add(frozenset(map(_value, X)))
        m = int(rng.integers(1, len(X) + 1))
        Y = [_token(rng, kind if kind in ("decimal", "mixed-scale") else "integer", d) for _ in range(m)]
        Y = _distinct(Y)
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
    row = {**row, "seconds": round(time.process_time() - start, 2),
           "relative": {f: float(b / (1 + top)) for f, b in sorted(claims.items())}}
    if bundle.share:  # softmax's τ* lowered for a float claim (bundle.build)
        row["share"] = bundle.share
    if tokens <= 50:  # where half precision has no claim within its limit, what stopped it
        stops = {name: _stop(cert, why) if bound is None else f"a bound above {LIMITS[name]:g}"
                 for name, bound, why in bundle.floats
                 if name in ("binary16", "bfloat16") and not row["relative"].get(name, 1.0) <= LIMITS[name]}
        if stops:
            row["stops"] = stops
    # Beside every bound, what real runs show: where no claim within the limit is proven, do they
    # miss it; where one is, how close the bound comes to them
    row["runs"] = _numpy_runs(bundle, ["binary32", *(["binary16"] if tokens <= 50 else [])], 1 + top)
    return row


def _stop(cert: dict, why: str) -> str:
    """Where a float analysis stopped, from its message: the phase of the first ReLU a float run may
    switch where it names one (what made the error grow), else of the layer it stopped at, and
    what stopped it there; an input beyond the format's range is a limit of the data."""
    if why.startswith("the input does not fit"):
        return "an input beyond the range"
    switch = re.search(r"the first ReLU a float run may switch: block (\d+) FF", why)
    stop = re.match(r"block (\d+) (FF|SA)", why)
    if switch is None and stop is None:
        return "elsewhere"
    block, layer = (int(switch[1]), "FF") if switch else (int(stop[1]), stop[2])
    # the collapse and the separation speak of a block's SA, the other phases of its FF
    names = [p["name"] for p in cert["phases"] if p["blocks"][0] <= block < p["blocks"][1] and p["name"] != "final"
             and (p["name"] in ("collapse", "separation")) == (layer == "SA")]
    what = ("a unit that may switch" if switch else "an argmax gap" if "argmax gap" in why
            else "an overflow" if "overflow" in why else "an error bound")
    name = (names or ["separation"])[0]
    if name == "bump" and block == next(p for p in cert["phases"] if p["name"] == "bump")["blocks"][0]:
        name = "separation"  # the bump phase's first FF is the separation's projection
    return f"{name}: {what}"


def _numpy_runs(bundle, formats: list[str], scale: Fraction) -> dict:
    """numpy's float runs (its own order and reversed), their worst deviation relative to 1 + max|y|
    ("overflow": a parameter beyond the format's range)."""
    from tfcert.verify.formats import parse_document, read_model

    model = read_model(parse_document("model.json", bundle.files["model.json"]))
    inputs = [p.input for p in bundle.dataset.pairs]
    final, out = _final(model, inputs), {}
    for fmt in formats:
        seen = _numpy_seen(model, inputs, final, fmt)
        out[fmt] = "overflow" if "overflow" in seen else float(max(seen)) / float(scale)
    return out


def _numpy_seen(model, inputs, final, fmt: str) -> list:
    """The deviation of numpy's runs in ``fmt`` (its own order, then every dot product accumulated
    in reverse) from the exact final tokens ("overflow": a parameter beyond the format's range)."""
    from tfcert.bench.floatrun import deviation

    try:
        with np.errstate(all="ignore"):
            return [deviation(model, inputs, final, fmt, order) for order in ("numpy", "reverse")]
    except OverflowError:
        return ["overflow", "overflow"]


def _rebuilt(row: dict) -> tuple:
    """The row's model, rebuilt (construction is deterministic), its inputs and its dataset."""
    from tfcert.construct.bundle import build
    from tfcert.verify.formats import parse_document, read_model

    _, doc = dataset(row["seed"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ds.json"
        path.write_text(json.dumps(doc))
        bundle = build(path, row["attention"])
    model = read_model(parse_document("model.json", bundle.files["model.json"]))
    return model, [p.input for p in bundle.dataset.pairs], bundle.dataset


@contextmanager
def _exp_anywhere(seed: int):
    """floatforms' runs with each exp anywhere within its 4u (floatforms.exp_anywhere) inside."""
    import random

    import floatforms

    within = floatforms.exp_within
    floatforms.exp_within = floatforms.exp_anywhere(random.Random(seed))
    try:
        yield
    finally:
        floatforms.exp_within = within


def attack(row: dict, fmt: str = "binary32") -> float:
    """The emulated attack's worst run in ``fmt`` on the row's model, relative to 1 + max|y|: tests/
    floatforms.py's fixed forms and max(150/n, 3000/n²) random ones (at least 2; n tokens: a run
    costs about n), each exp pushed to anywhere in its 4u. A lone token's worst run may need one of
    seven values of exp(0), one of four normalisations and one FMA order of the snap: about one run
    in a few hundred (held-out seed 1019), so few tokens get many runs."""
    import floatforms

    runs = max(2, 150 // row["tokens"], 3000 // row["tokens"] ** 2)
    model, inputs, data = _rebuilt(row)
    with _exp_anywhere(row["seed"]):
        seen = floatforms.worst(model, inputs, _final(model, inputs), fmt, runs=runs, seed=row["seed"])
    return float(Fraction(int(seen.p), int(seen.q)) / (1 + _top(data)))


def first_miss(model, inputs, final, top: Fraction, fmt: str, seed: int, runs: int = 100) -> tuple[str, str]:
    """(what, found): the first run the float model allows in ``fmt`` that misses by more than
    1e-1 of ``top`` (1 + max|y|) or overflows in the residual stream (floatforms.ResidualOverflow:
    its output is not finite) — tests/floatforms.py's runs: the fixed forms, softmax's skewed
    ones, then up to ``runs`` random ones, exp anywhere within its 4u; failing that, the first
    that overflows elsewhere (an infinity, which a later ReLU may turn into 0 again, so not shown
    to miss)."""
    import floatforms

    skewed = model.attention == "softmax"
    tried = len(floatforms.configs(runs, skewed))
    what, found = "no run misses", f"no run of {tried} misses"
    with _exp_anywhere(seed):
        for n, mode, run in floatforms.attack_runs(fmt, runs, seed, skewed):
            try:
                seen = floatforms.deviation(floatforms.forward(model, inputs, run), final)
            except floatforms.ResidualOverflow:
                return "a run misses", f"run {n} ({mode}) overflows in the residual stream"
            except OverflowError:  # an infinity, which a ReLU may still turn into 0: no miss yet
                if what == "no run misses":
                    what, found = "a run overflows", f"run {n} ({mode}) overflows, no run of {tried} misses"
                continue
            seen = Fraction(int(seen.p), int(seen.q))
            if seen > Fraction(str(LIMITS[fmt])) * top:
                return "a run misses", f"run {n} ({mode}) misses by {float(seen / top):.2g}"
    return what, found


MISSES_HEAD = ("each missing half-precision claim (at most 50 tokens, no claim within 0.1 of 1 + max|y|) beside the "
               "first run the float model allows (tests/floatforms.py) that misses by more than 0.1 of it, or overflows "
               "in the residual stream (its output is then infinite or NaN); failing that, the first that overflows "
               "elsewhere")


def half_misses(rows: list[dict], runs: int = 100) -> str:
    """Every missing half-precision claim of FILE (at most 50 tokens, no claim within 1e-1) beside
    ``first_miss``'s run; an input beyond the format's range is the data's limit. numpy's float16
    runs are not used: its matmul and sums of float16 accumulate in float32 and round once, which
    the float model does not cover."""
    lines, tally = [], Counter()
    for row in rows:
        wanted = [f for f in ("binary16", "bfloat16") if f in row.get("stops", {})]
        if not wanted:
            continue
        model, inputs, data = _rebuilt(row)
        final, top = _final(model, inputs), 1 + _top(data)
        for fmt in wanted:
            what, found = (("the data", "the data: an input beyond the range")
                           if row["stops"][fmt] == "an input beyond the range"
                           else first_miss(model, inputs, final, top, fmt, row["seed"], runs))
            tally[row["attention"], fmt, what] += 1
            lines.append(f"{row['seed']:4d} {row['attention']:7s} {fmt:8s} {row['tokens']:2d} tokens, d = "
                         f"{row['d']:2d} ({row['kind']}): {found}")
            print(lines[-1], file=sys.stderr, flush=True)
    head = [MISSES_HEAD]
    for attention in ("hardmax", "softmax"):
        for fmt in ("binary16", "bfloat16"):
            counts = {k[2]: v for k, v in tally.items() if k[:2] == (attention, fmt)}
            head.append(f"{attention} {fmt}: {sum(counts.values())} missing; "
                        + ", ".join(f"{what} {v}" for what, v in sorted(counts.items())))
    return "\n".join(head + lines)


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
            half = [(fmt, sum(r.get("relative", {}).get(fmt, 1.0) <= LIMITS[fmt] for r in sized))
                    for fmt in ("binary16", "bfloat16") if hi <= 50]  # the issue asks half precision of these
            lines.append(f"  {lo}–{hi} tokens: binary32 claim on {got} of {len(sized)}"
                         + "".join(f", {fmt} within {LIMITS[fmt]:g} on {n}" for fmt, n in half))
        for fmt in ("binary32", "binary16"):
            runs = [r["runs"][fmt] for r in mine if fmt in r.get("runs", {})
                    and not r["relative"].get(fmt, 1.0) <= LIMITS[fmt]]
            if runs:
                miss = sum(v == "overflow" or v == float("inf") or v > LIMITS[fmt] for v in runs)
                lines.append(f"  no {fmt} claim within {LIMITS[fmt]:g}" + (" (≤ 50 tokens)" if fmt == "binary16" else "")
                             + f" on {len(runs)}: numpy's {fmt} runs miss it on {miss}, land within it on "
                             f"{len(runs) - miss}")
        for fmt in ("binary16", "bfloat16"):
            stops = Counter(r["stops"][fmt] for r in mine if fmt in r.get("stops", {}))
            if stops:
                lines.append(f"  no {fmt} claim within {LIMITS[fmt]:g} (≤ 50 tokens) on {sum(stops.values())}, "
                             "where the analysis stops: "
                             + ", ".join(f"{where} {n}" for where, n in sorted(stops.items(), key=lambda t: (-t[1], t[0]))))
        lines += _tightness(mine)
    return "\n".join(lines)


def _tightness(rows: list[dict]) -> list[str]:
    """How close each proven bound comes to numpy's runs (the worst of its own order and reversed),
    per format: over the bounds above 0, on how many the runs are exact, and where a run deviates,
    the lowest and the median ratio run / bound; and whether every run under a bound of 0 is exact."""
    lines = []
    for fmt in ("binary32", "binary16"):
        seen = [(r["runs"][fmt], r["relative"][fmt], r["seed"]) for r in rows
                if fmt in r.get("relative", {}) and isinstance(r.get("runs", {}).get(fmt), float)]
        above = [(run, bound, seed) for run, bound, seed in seen if bound > 0]
        ratios = sorted((run / bound, seed) for run, bound, seed in above if run > 0)
        exact = [run for run, bound, _ in seen if bound == 0]
        if above:
            lines.append(f"  {fmt} claims above 0: {len(above)}, numpy's runs exact on {len(above) - len(ratios)}"
                         + (f"; where they deviate, run / bound lowest {ratios[0][0]:.2g} (seed {ratios[0][1]}), "
                            f"median {ratios[len(ratios) // 2][0]:.2g}, below 0.01 on {sum(q < 0.01 for q, _ in ratios)}"
                            if ratios else ""))
        if exact:
            lines.append(f"  {fmt} claims of 0: {len(exact)}, numpy's runs exact on {sum(v == 0 for v in exact)}")
    attacked = sorted((r["attack"]["binary32"] / r["relative"]["binary32"], r["seed"]) for r in rows if "attack" in r)
    if attacked:
        lines.append(f"  where numpy's binary32 runs stay below 0.01 of a bound above 0 (≤ 50 tokens: {len(attacked)}), "
                     f"the emulated attack's worst run / bound: lowest {attacked[0][0]:.2g} (seed {attacked[0][1]}), "
                     f"median {attacked[len(attacked) // 2][0]:.2g}, below 0.01 on {sum(q < 0.01 for q, _ in attacked)}"
                     + "".join(f" (seed {s})" for q, s in attacked if q < 0.01))
    return lines


def data_limits(count: int, most: int = 50) -> str:
    """What the data alone rules out in each narrow format, on the survey's datasets of at most
    ``most`` tokens: an input beyond the format's range; two tokens of one sequence equal once
    rounded (fewer distinct inputs than outputs); two sequences whose rounded input sets coincide
    with different output sets. A format without one of these leaves the refusal to the model."""
    from flint import fmpq

    from tfcert.verify.floats import FORMATS, round_nearest

    lines = [f"what the data rules out, on the survey's datasets of at most {most} tokens (of {count})"]
    small = [(seed, doc) for seed, doc in ((seed, dataset(seed)[1]) for seed in range(count))
             if sum(len(p["input"]) for p in doc["pairs"]) <= most]
    for name in ("binary32", "binary16", "bfloat16"):
        found: dict[str, list[int]] = {"an input beyond the range": [], "fewer distinct rounded inputs than outputs": [],
                                       "equal rounded input sets, different outputs": []}
        for seed, doc in small:
            try:
                rounded = [frozenset(tuple(round_nearest(fmpq(Fraction(v).numerator, Fraction(v).denominator),
                                                         FORMATS[name]) for v in x) for x in p["input"])
                           for p in doc["pairs"]]
            except OverflowError:
                found["an input beyond the range"].append(seed)
                continue
            outputs = [frozenset(tuple(y) for y in p["output"]) for p in doc["pairs"]]
            if any(len(x) < len(y) for x, y in zip(rounded, outputs)):
                found["fewer distinct rounded inputs than outputs"].append(seed)
            seen: dict = {}
            if any(seen.setdefault(x, y) != y for x, y in zip(rounded, outputs)):
                found["equal rounded input sets, different outputs"].append(seed)
        lines.append(f"{name} ({len(small)} datasets):")
        lines += [f"  {what}: {len(seeds)}" + (f" (seeds {', '.join(map(str, seeds))})" if seeds else "")
                  for what, seeds in found.items()]
    return "\n".join(lines)


DTYPES = {"binary64": "float64", "binary32": "float32", "binary16": "float16", "bfloat16": "bfloat16"}
TABLES = REPO / "tests" / "data" / "tables"
HEADER = "format    bound     numpy     reversed  torch     onnx"


def _final(model, inputs) -> tuple:
    """The exact final tokens (the verifier's replay)."""
    from tfcert.verify.evaluate import Replay

    replay = Replay(model, inputs)
    for _ in replay.steps():
        pass
    return replay.sequences()


def _runs(model, inputs, final, fmt: str) -> list:
    """The deviation of real float runs in ``fmt`` from the exact final tokens: numpy (its own
    order and a reversed accumulation; it has no bfloat16), the exported PyTorch module on the CPU
    and onnxruntime (float64 and float32 only), where those are installed ("overflow": a parameter
    beyond the format's range; None: not run)."""
    import importlib.util

    import tfcert.export as tx
    from tfcert.bench.floatrun import DTYPES as NUMPY

    seen = _numpy_seen(model, inputs, final, fmt) if fmt in NUMPY else [None, None]
    ran = None
    if importlib.util.find_spec("torch") is not None:
        try:
            ran = tx.max_deviation(tx.to_torch(model, DTYPES[fmt]), model, inputs)
        except Exception:  # noqa: BLE001 - a parameter that overflows the dtype
            ran = "overflow"
    ort = None
    if (fmt in ("binary64", "binary32") and importlib.util.find_spec("onnxruntime") is not None
            and importlib.util.find_spec("onnx") is not None):
        import onnxruntime
        from tfcert.export.onnxgraph import to_onnx
        ort = tx.max_deviation(onnxruntime.InferenceSession(to_onnx(model, DTYPES[fmt])), model, inputs)
    return [*seen, ran, ort]


def _relative(value, top: Fraction) -> str:
    if value is None or isinstance(value, str):
        return value or "—"
    return "inf" if value == float("inf") else f"{float(value) / float(1 + top):.1e}"


def _top(data) -> Fraction:
    return max(abs(Fraction(int(v.p), int(v.q))) for p in data.pairs for y in p.output for v in y)


def _measured(label: str, model, data, claims: dict) -> tuple[list[str], dict]:
    """One line per format: the proven bound beside the real runs, relative to 1 + max|y|;
    and the worst run per format (None where none ran)."""
    inputs = [p.input for p in data.pairs]
    final, top = _final(model, inputs), _top(data)
    lines, worst = [], {}
    for fmt in DTYPES:
        runs = _runs(model, inputs, final, fmt)
        lines.append(f"{label} {fmt:9s} " + " ".join(f"{_relative(v, top):9s}" for v in
                                                     [claims.get(fmt), *runs]).rstrip())
        worst[fmt] = max((float("inf") if isinstance(v, str) else float(v) / float(1 + top)
                          for v in runs if v is not None), default=None)
    return lines, worst


def _claims(cert: dict) -> dict:
    return {c["format"]: Fraction(c["bound"]) for ph in cert["phases"] for c in ph["claims"] if c["kind"] == "float"}


def _why(model, data, formats: list[str]) -> dict:
    """tfcert audit --float's reason for each format without a bound."""
    from tfcert.audit.audit import audit

    if not formats:
        return {}
    return {b.format: b.failure for b in audit(model, data, floats=tuple(formats)).floats if b.bound is None}


def examples() -> str:
    """A table per bundle of certificates/: each format's proven bound (relative to 1 + max|y|;
    "—": none) beside the deviation real runs show (``_runs``)."""
    from tfcert.verify.formats import parse_document, read_dataset, read_model

    lines, reasons, misses = [f"bundle                 {HEADER}"], [], []
    for folder in sorted(p for p in (REPO / "certificates").iterdir() if p.is_dir()):
        model = read_model(parse_document(str(folder / "model.json"), (folder / "model.json").read_bytes()))
        data = read_dataset(parse_document(str(folder / "dataset.json"), (folder / "dataset.json").read_bytes()))
        claims = _claims(json.loads((folder / "certificate.json").read_text()))
        lines += _measured(f"{folder.name:22s}", model, data, claims)[0]
        reasons += [f"{folder.name} {fmt}: {why}" for fmt, why in _why(model, data, list(DTYPES)).items()]
        inputs = [p.input for p in data.pairs]
        if sum(map(len, inputs)) <= 50:
            top = 1 + _top(data)
            misses += [f"{folder.name} {fmt}: " + first_miss(model, inputs, _final(model, inputs), top, fmt, 0)[1]
                       for fmt in ("binary16", "bfloat16") if fmt not in claims or claims[fmt] > top / 10]
    return "\n".join([*lines, "", "where no claim is made, why (tfcert audit --float FORMAT):", *reasons, "",
                      "where a bundle of at most 50 tokens has no half-precision claim within 0.1 of 1 + max|y|, the "
                      "first run the float model allows that misses (as --half-misses):", *misses])


def _table(path: Path, attention: str) -> tuple[list[str], str, list[str]]:
    """One table in one attention: its lines, its verdict and the reasons for missing claims."""
    from tfcert.construct.bundle import build
    from tfcert.verify.check import check_certificate
    from tfcert.verify.formats import load_document, parse_document, read_model

    label = f"{path.stem}-{attention}"
    bundle = build(path, attention)  # construct verifies before it writes; and again from the files:
    docs = {name: parse_document(name, raw) for name, raw in bundle.files.items()}
    report = check_certificate(docs["model.json"], load_document(path), docs["certificate.json"])
    assert report.ok, f"{label}: the written bundle does not verify"
    cert = json.loads(bundle.files["certificate.json"])
    model, data, claims = read_model(docs["model.json"]), bundle.dataset, _claims(cert)
    lines, worst = _measured(f"{label:16s}", model, data, claims)
    scale = 1 + _top(data)
    b32 = claims.get("binary32")
    if b32 is not None and b32 / scale <= Fraction(1, 1000):
        verdict = f"binary32 claim {_relative(b32, _top(data))} ≤ 1e-3"
    else:
        verdict = (f"no binary32 claim ≤ 1e-3; the float32 runs' worst {worst['binary32']:.1e} "
                   + ("misses 1e-3" if worst["binary32"] > 1e-3 else "is within 1e-3"))
    ratios = ", ".join(f"{fmt} {worst[fmt] / float(b / scale):.2f}" for fmt, b in claims.items()
                       if worst[fmt] is not None)
    size = next(c for c in cert["phases"][-1]["claims"] if c["kind"] == "size")
    verdict = (f"{label}: d={data.d} N={len(data.pairs)} tokens={sum(len(p.input) for p in data.pairs)} "
               f"targets={sum(len(p.output) for p in data.pairs)} blocks={size['blocks']} 1+max|y|={float(scale):.6g}; "
               f"{len(report.results)} claims verified; {verdict}; worst run / bound: {ratios}")
    missing = [f for f in DTYPES if f not in claims]
    reasons = [f"{label} {fmt}: {why}" for fmt, why in _why(model, data, missing).items()]
    return lines, verdict, reasons


def tables() -> str:
    """The measurement tables of tests/data/tables/ (tests/make_tables.py), each constructed in
    both attentions and verified again from the written files: each format's proven bound beside
    the real runs (``_runs``), and where no binary32 claim is proven, whether the float32 runs
    really miss 1e-3·(1 + max|y|)."""
    lines, verdicts, reasons = [f"table            {HEADER}"], [], []
    for path in sorted(TABLES.glob("*.json")):
        for attention in ("hardmax", "softmax"):
            start = time.process_time()
            more, verdict, why = _table(path, attention)
            lines, reasons = lines + more, reasons + why
            verdicts.append(verdict)
            print(f"{path.stem}-{attention}: {time.process_time() - start:.1f} s", file=sys.stderr, flush=True)
    return "\n".join([*lines, "", *verdicts, "",
                      "where no claim is made, why (tfcert audit --float FORMAT):", *reasons])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--first", type=int, default=0, help="the first seed (default 0; the survey's held-out "
                   "datasets are seeds 1000-1199, never used while the construction was tuned)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--attention", choices=["hardmax", "softmax"], action="append",
                   help="only this attention (repeatable; default both)")
    p.add_argument("--summary", action="store_true", help="only summarise FILE")
    p.add_argument("--dataset", type=int, metavar="SEED", help="only print the seed's dataset (tfcert.dataset/1)")
    p.add_argument("--data-limits", action="store_true",
                   help="only what the data rules out in each narrow format (datasets of at most 50 tokens)")
    p.add_argument("--examples", action="store_true", help="only the bundles of certificates/ against real runs")
    p.add_argument("--tables", action="store_true", help="only the measurement tables of tests/data/tables/")
    p.add_argument("--attack", action="store_true", help="add the emulated attack's worst binary32 run to FILE's "
                   "lines whose bound is above 0 while numpy's runs are exact (at most 50 tokens)")
    p.add_argument("--half-misses", action="store_true", help="only each missing half-precision claim of FILE "
                   "beside a run the float model allows that misses (docs/results/float-half-misses.txt)")
    p.add_argument("--attack-binary16", type=int, nargs="+", metavar="SEED",
                   help="only the emulated attack's worst binary16 run on these seeds' softmax models, beside "
                        "FILE's binary16 bound (each relative to 1 + max|y|)")
    args = p.parse_args(argv)
    if args.dataset is not None:
        print(json.dumps(dataset(args.dataset)[1]))
        return 0
    if args.data_limits:
        print(data_limits(args.count))
        return 0
    if args.examples or args.tables:
        print(examples() if args.examples else tables())
        return 0
    rows = [json.loads(line) for line in args.out.read_text().splitlines()] if args.out.exists() and (
        args.resume or args.summary or args.attack or args.attack_binary16 or args.half_misses) else []
    if args.half_misses:
        print(half_misses(rows))
        return 0
    if args.attack_binary16:
        for seed in args.attack_binary16:
            row = next(r for r in rows if r["seed"] == seed and r["attention"] == "softmax")
            seen, bound = attack(row, "binary16"), row["relative"]["binary16"]
            print(f"{seed:3d} softmax binary16: attack {seen:.3g}, bound {bound:.3g}, attack / bound {seen / bound:.3f}",
                  flush=True)
        return 0
    if args.attack:
        for row in rows:
            bound, run = row.get("relative", {}).get("binary32", 0), row.get("runs", {}).get("binary32")
            if row["tokens"] <= 50 and "attack" not in row and bound > 0 and isinstance(run, float) and run < 0.01 * bound:
                row["attack"] = {"binary32": attack(row)}
                print(f"{row['seed']:3d} {row['attention']:7s} attack {row['attack']['binary32']:.3g}, bound "
                      f"{row['relative']['binary32']:.3g}", file=sys.stderr, flush=True)
                args.out.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    elif not args.summary:
        done = {(r["seed"], r["attention"]) for r in rows}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a" if args.resume else "w") as f:
            for seed in range(args.first, args.first + args.count):
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
