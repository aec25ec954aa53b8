"""``tfcert bench``: the benchmark suite. For each shape of random dataset
(N sequences of n tokens, m targets each, dimension d) one run measures
construct (as ``tfcert construct``: build, certify, verify), exact verify, the dense float64 forward pass a user
would otherwise run, and the naive exact replay (up to a cap), each as its
own process: whole-process seconds as a user meets them, the seconds of the
work alone, and the process's peak resident memory. It reports ratios, the
largest numerator/denominator bits, the float columns, and fits the scaling
exponents of construct and verify. Absolute seconds depend on the machine;
ratios and exponents travel.

Phases run as ``python -m tfcert.bench.benchphase PHASE FOLDER [ATTENTION]`` (one JSON line
on stdout) so that each is timed and measured alone, pays only for its own
imports, and the naive replay can be stopped at its cap; the peers they run
beside tfcert's own commands are in peers.py.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Callable

import numpy as np
from flint import fmpq

from tfcert.bench.benchphase import PHASES
from tfcert.errors import InputError
from tfcert.progress import quiet

Shape = tuple[int, int, int, int]  # (N sequences, n tokens each, m targets each, d)

SUITES: dict[str, list[Shape]] = {
    "quick": [(10, 8, 2, 8), (20, 8, 2, 8), (10, 8, 4, 8)],
    "N-scaling": [(N, 64, 2, 16) for N in (250, 500, 1000, 2000, 4000)],
    "n-scaling": [(1, n, 40, 2) for n in (100, 1000, 5000)],
    "tiny": [(20000, 1, 1, 2)],
    "m-scaling": [(250, 64, m, 16) for m in (1, 2, 4)],
    "d-scaling": [(250, 64, 2, d) for d in (4, 32)],
    "naive": [(1, n, 40, 2) for n in (5000, 10000, 20000)],  # with --naive-cap 900: where the naive replay ends
    # one long sequence, construct and verify alone (an n × n float64 pass or naive replay would not end)
    "one-sequence": [(1, 49500, 40, 2), (1, 240000, 40, 2)],
    "one-sequence-softmax": [(1, 2000, 40, 3)],
    "one-sequence-quick": [(1, 500, 8, 2), (1, 2500, 8, 2)],
    "one-sequence-softmax-quick": [(1, 200, 8, 3)],
}
NOOP: dict[str, int] = {"noop": 300_000, "noop-quick": 3_000}  # suites of one no-op model each: its blocks
ALONE = {"one-sequence": "hardmax", "one-sequence-softmax": "softmax", "one-sequence-quick": "hardmax",
         "one-sequence-softmax-quick": "softmax"}  # the suites measured by construct and verify alone, and how
FULL = ("N-scaling", "n-scaling", "tiny", "m-scaling", "d-scaling")  # the default: every suite but quick and naive
BASE: dict[str, Shape] = {"N": (250, 64, 2, 16), "n": (1, 100, 40, 2), "m": (250, 64, 2, 16), "d": (250, 64, 2, 16)}
DIMS = "Nnmd"
SHAPES_HELP = "VAR=v1,v2,… (VAR one of N, n, m, d, varied from N=250 n=64 m=2 d=16; n from N=1 m=40 d=2) or NxnxmxD"


def label(shape: Shape) -> str:
    return "N=%d n=%d m=%d d=%d" % shape


def shape_of(r: dict) -> Shape:
    return r["N"], r["n"], r["m"], r["d"]


# ---------------------------------------------------------------- choosing shapes

def parse_shapes(text: str) -> list[Shape]:
    """One ``--shapes`` value: ``N=250,500`` (one dimension varied from its
    base shape) or ``10x8x2x8``; InputError quoting the value otherwise."""
    where = f"--shapes {text}"
    explicit = re.fullmatch(r"(\d+)x(\d+)x(\d+)x(\d+)", text)
    series = re.fullmatch(r"([Nnmd])=(\d+(?:,\d+)*)", text)
    if explicit:
        shapes = [tuple(int(g) for g in explicit.groups())]
    elif series:
        k = DIMS.index(series.group(1))
        base = BASE[series.group(1)]
        shapes = [base[:k] + (int(v),) + base[k + 1:] for v in series.group(2).split(",")]
    else:
        raise InputError(f"{where}: expected {SHAPES_HELP}")
    for N, n, m, d in shapes:
        if min(N, n, m, d) < 1:
            raise InputError(f"{where}: N, n, m and d must be at least 1")
        if m > n:
            raise InputError(f"{where}: m={m} targets need n ≥ {m} tokens per sequence (m ≤ n); "
                             f"give the shape in full, e.g. 1x{m}x{m}x{d}")
    return shapes


def choose_shapes(shapes: list[str] | None, suites: list[str] | None, quick: bool) -> list[Shape]:
    """The shapes to measure, in order, each once: the named suites, then
    the --shapes values; without either, the quick suite or every suite."""
    for name in suites or ():
        if name not in SUITES and name not in NOOP:
            raise InputError(f"--suite {name}: expected one of {', '.join([*SUITES, *NOOP])}")
    picked = [s for name in suites or () for s in SUITES.get(name, ())] + [s for t in shapes or () for s in parse_shapes(t)]
    if not picked and any(name in NOOP for name in suites or ()):
        return []  # only no-op models asked for
    if not picked:
        picked = SUITES["quick"] if quick else [s for name in FULL for s in SUITES[name]]
    return list(dict.fromkeys(picked))


# ---------------------------------------------------------------- datasets

def _distinct(rng: random.Random, count: int, d: int, radius: int, room: int) -> list[list[str]]:
    """``count`` distinct integer tokens, coordinates in [-r, r] with r the
    least doubling of ``radius`` whose grid has twice ``room`` points."""
    while (2 * radius + 1) ** d < 2 * room:
        radius *= 2
    tokens: dict[tuple, None] = {}
    while len(tokens) < count:
        tokens[tuple(rng.randint(-radius, radius) for _ in range(d))] = None
    return [list(map(str, t)) for t in tokens]


def random_dataset(n_seq: int, n: int, m: int, d: int, seed: int = 0) -> bytes:
    """A reproducible dataset of small integers (so tokens are shared across
    sequences); the grid widens only where it must (d = 2: thousands of
    tokens, or of one-token sequences, whose input sets must differ)."""
    rng = random.Random(seed)
    pairs: list[dict] = []
    seen: set[frozenset] = set()
    while len(pairs) < n_seq:
        tokens = _distinct(rng, n, d, 5, max(n, n_seq))
        targets = _distinct(rng, m, d, 9, m)
        key = frozenset(map(tuple, tokens))
        if key not in seen:
            seen.add(key)
            pairs.append({"input": tokens, "output": targets})
    return _dumps({"format": "tfcert.dataset/1", "d": d, "pairs": pairs})


def _dumps(value: dict) -> bytes:
    from tfcert.canonical import dumps

    return dumps(value)


# ---------------------------------------------------------------- phases, one process each

def run_phase(phase: str, folder: Path, cap: float | None = None, attention: str = "hardmax") -> dict | None:
    """Run one phase as its own process: what it reports, with ``s`` its
    whole-process seconds (interpreter start, imports, reading and writing
    the files); None when it was still running after ``cap`` seconds (it is
    killed then) or ``cap`` is 0."""
    if cap == 0:
        return None
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "tfcert.bench.benchphase", phase, str(folder), attention],
                              capture_output=True, text=True, timeout=cap)
    except subprocess.TimeoutExpired:
        return None
    seconds = time.perf_counter() - start
    if proc.returncode == 2:
        raise InputError(f"bench {phase}: {proc.stderr.strip().removeprefix('error: ')}")
    if proc.returncode != 0:
        raise RuntimeError(f"bench {phase}: the process failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return {"s": seconds, **json.loads(proc.stdout)}


# ---------------------------------------------------------------- one shape

def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def _of(run: dict | None, key: str):
    """A phase's report entry; None for a phase that did not run to the end (the capped naive replay)."""
    return None if run is None else run[key]


def _ratio(a: dict | None, b: dict | None) -> float | None:
    return None if a is None or b is None else round(a["s"] / b["s"], 3)


def row(shape: Shape, runs: dict[str, dict | None]) -> dict:
    """One shape's line of results from its phases' reports."""
    c, v, f, nv, bits, st = (runs[p] for p in PHASES)
    N, n, m, d = shape
    return {"N": N, "n": n, "m": m, "d": d, "tokens": c["tokens"], "outputs": c["outputs"], "blocks": c["blocks"],
            "claims": v["claims"], "verified": v["ok"], "failed_kinds": v["failed"],
            "construct_s": _r(c["s"]), "verify_s": _r(v["s"]), "float64_forward_s": _r(f["s"]),
            "naive_s": _r(_of(nv, "s")),
            "construct_work_s": _r(c["work_s"]), "verify_work_s": _r(v["work_s"]),
            "float64_work_s": _r(f["work_s"]), "naive_work_s": _r(_of(nv, "work_s")),
            "verify_over_float64": _ratio(v, f), "construct_over_float64": _ratio(c, f),
            "naive_over_verify": _ratio(nv, v),
            "construct_maxrss_mib": c["maxrss_mib"], "verify_maxrss_mib": v["maxrss_mib"],
            "float64_maxrss_mib": f["maxrss_mib"], "naive_maxrss_mib": _of(nv, "maxrss_mib"),
            "naive_interpolates": _of(nv, "interpolates"),
            "token_numerator_bits": _of(bits, "token_numerator_bits"),
            "token_denominator_bits": _of(bits, "token_denominator_bits"),
            **{k: val for k, val in st.items() if k not in ("s", "maxrss_mib")}}


def time_limit(phase: str, cap: float, runs: dict) -> float | None:
    """Seconds a phase may run: the naive replay up to the cap; its rerun
    noting bits (about 1.5× slower) only after it finished, up to twice the
    cap; the others without limit."""
    if phase == "naive":
        return cap
    if phase == "bits":
        return 2 * cap if runs["naive"] else 0
    return None


def measure(shape: Shape, cap: float, say: Callable[[str], None]) -> dict:
    """Every phase of one shape, in a scratch folder removed afterwards."""
    runs: dict[str, dict | None] = {}
    with tempfile.TemporaryDirectory(prefix="tfcert-bench-") as tmp:
        folder = Path(tmp)
        (folder / "dataset.json").write_bytes(random_dataset(*shape))
        for phase in PHASES:
            limit = time_limit(phase, cap, runs)
            runs[phase] = done = run_phase(phase, folder, limit)
            say(f"{phase} " + (f"{done['s']:.2f} s" if done else "capped" if limit else "skipped"))
    return row(shape, runs)


def measure_alone(shape: Shape, attention: str, say: Callable[[str], None]) -> dict:
    """One long sequence's construct and verify (ALONE), each its own process."""
    with tempfile.TemporaryDirectory(prefix="tfcert-bench-") as tmp:
        folder = Path(tmp)
        (folder / "dataset.json").write_bytes(random_dataset(*shape))
        runs = {}
        for phase in ("construct", "verify"):
            runs[phase] = run_phase(phase, folder, attention=attention)
            say(f"{phase} {runs[phase]['s']:.2f} s")
    c, v = runs["construct"], runs["verify"]
    N, n, m, d = shape
    return {"N": N, "n": n, "m": m, "d": d, "attention": attention, "tokens": c["tokens"], "blocks": c["blocks"],
            "verified": v["ok"], "failed_kinds": v["failed"], "construct_s": _r(c["s"]), "verify_s": _r(v["s"]),
            "construct_work_s": _r(c["work_s"]), "verify_work_s": _r(v["work_s"]),
            "construct_maxrss_mib": c["maxrss_mib"], "verify_maxrss_mib": v["maxrss_mib"]}


def alone_line(r: dict, first: dict | None) -> str:
    """One line per long sequence; beside a later shape of its suite, the time ratio to the first."""
    ratio = "" if first is None else (f"; construct {r['construct_s'] / first['construct_s']:.2f}x the first "
                                      f"for {r['tokens'] / first['tokens']:.2f}x the tokens")
    return (f"{label(shape_of(r))} {r['attention']}: construct {_secs(r['construct_s'])} (peak "
            f"{r['construct_maxrss_mib']:.0f} MiB), verify {_secs(r['verify_s'])} "
            f"({'ok' if r['verified'] else 'FAILED'}, peak {r['verify_maxrss_mib']:.0f} MiB){ratio}")


# ---------------------------------------------------------------- scaling exponents

def exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y against log x: y grows as x^slope."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def series(rows: list[dict], vary: str) -> list[dict]:
    """The largest set of rows that differ only in ``vary`` (ordered by it):
    one scaling series; [] unless it has two shapes or more."""
    groups: dict[tuple, dict[int, dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in DIMS if k != vary), {})[r[vary]] = r
    best = max(groups.values(), key=len, default={})
    return [best[k] for k in sorted(best)] if len(best) >= 2 else []


FITS = {"tokens": "N", "outputs": "m"}  # Σn over the N-series (fixed n, m, d); Σm over the m-series (fixed N, n, d)


def exponents(rows: list[dict]) -> dict:
    """Fitted exponents of construct and verify work seconds in Σn and in Σm
    (null without a series); ``over`` names the shapes fitted."""
    out: dict = {}
    for x, vary in FITS.items():
        s = series(rows, vary)
        out[x] = {"over": [label(shape_of(r)) for r in s],
                  **{p: round(exponent([r[x] for r in s], [max(r[f"{p}_work_s"], 1e-6) for r in s]), 3)
                     for p in ("construct", "verify")}} if s else None
    return out


# ---------------------------------------------------------------- the no-op model (issue 22)

NOOP_BLOCK = {"ff": {"eta": "1", "U": [["0", "0"]], "b": ["0"], "W": [["0"], ["0"]]},
              "sa": {"rho": "1", "A": {"scale": "0", "low_rank": []}, "V": {"scale": "0", "low_rank": []}}}


def noop_files(blocks: int) -> dict[str, bytes]:
    """A model of ``blocks`` blocks that leave every token as it is (η = 1,
    U, b, W zero; ρ = 1, A = V = 0), 168 bytes each as json.dumps writes
    them (300 000 blocks: 50 MB), and a dataset of a few sequences it maps
    onto themselves."""
    model = {"format": "tfcert.model/1", "d": 2, "attention": "hardmax", "blocks": [NOOP_BLOCK] * blocks}
    pairs = [{"input": tokens, "output": tokens} for tokens in
             ([["1", "2"], ["3", "4"]], [["0", "1"], ["5", "-2"], ["1/2", "7"]], [["-1", "-1"]])]
    return {"model.json": json.dumps(model).encode(), "dataset.json": _dumps({"format": "tfcert.dataset/1", "d": 2,
                                                                             "pairs": pairs})}


def noop_row(name: str, say: Callable[[str], None]) -> dict:
    """Verify (and the float64 pass) on the no-op model of suite ``name``; its
    certificate, with a binary64 float claim, from ``tfcert audit`` (untimed)."""
    blocks = NOOP[name]
    with tempfile.TemporaryDirectory(prefix="tfcert-bench-") as tmp:
        folder = Path(tmp)
        for file, data in noop_files(blocks).items():
            (folder / file).write_bytes(data)
        say("audit (the certificate)")
        proc = subprocess.run([sys.executable, "-m", "tfcert", "-q", "audit", "--model", str(folder / "model.json"),
                               "--dataset", str(folder / "dataset.json"), "--float", "binary64",
                               "-o", str(folder / "certificate.json")], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"bench: tfcert audit exited {proc.returncode}:\n{proc.stderr[-4000:]}")
        v, f = run_phase("verify", folder), run_phase("float64", folder)
        say(f"verify {v['s']:.2f} s, float64 {f['s']:.2f} s")
        model_mb = (folder / "model.json").stat().st_size / 1e6
    return {"suite": name, "blocks": blocks, "model_mb": round(model_mb, 1), "verified": v["ok"],
            "failed_kinds": v["failed"], "verify_s": _r(v["s"]), "verify_work_s": _r(v["work_s"]),
            "verify_maxrss_mib": v["maxrss_mib"], "float64_forward_s": _r(f["s"]),
            "float64_maxrss_mib": f["maxrss_mib"], "verify_over_float64": _ratio(v, f)}


def noop_line(r: dict) -> str:
    return (f"no-op model ({r['suite']}): {r['blocks']} blocks, {r['model_mb']} MB; verify {_secs(r['verify_s'])} "
            f"({'ok' if r['verified'] else 'FAILED'}), peak {r['verify_maxrss_mib']:.0f} MiB; float64 "
            f"{_secs(r['float64_forward_s'])}; verify/float64 {r['verify_over_float64']:.2f}x")


# ---------------------------------------------------------------- the corrupted model

def corrupt(model_raw: bytes) -> bytes:
    """The model with one output weight of its last snap off by 1/2^20: W[i][j]
    for the unit j that switches on first (largest bias: it is on across the
    plateau, so every token the snap moves lands off target), i its first
    non-zero row."""
    model = json.loads(model_raw)
    ff = model["blocks"][-1]["ff"]
    live = [k for k in range(len(ff["b"])) if any(Fraction(r[k]) for r in ff["W"])]
    j = max(live, key=lambda k: Fraction(ff["b"][k]))
    i = next(r for r, w in enumerate(ff["W"]) if Fraction(w[j]))
    ff["W"][i][j] = str(Fraction(ff["W"][i][j]) + Fraction(1, 2**20))
    return _dumps(model)


def corrupted_check(shape: Shape, cap: float) -> dict:
    """Build the shape's bundle, corrupt its model and re-point the
    certificate's model_sha256 at it (so the replay, not the hash, must
    catch it): both the verifier and the naive replay must say no."""
    with tempfile.TemporaryDirectory(prefix="tfcert-bench-") as tmp:
        folder = Path(tmp)
        (folder / "dataset.json").write_bytes(random_dataset(*shape))
        run_phase("construct", folder)
        bad = corrupt((folder / "model.json").read_bytes())
        cert = json.loads((folder / "certificate.json").read_bytes())
        cert["model_sha256"] = hashlib.sha256(bad).hexdigest()
        (folder / "model.json").write_bytes(bad)
        (folder / "certificate.json").write_bytes(_dumps(cert))
        v, nv = run_phase("verify", folder), run_phase("naive", folder, cap)
    naive = _of(nv, "interpolates")
    return {"shape": label(shape), "verified": v["ok"], "failed_kinds": v["failed"], "naive_interpolates": naive,
            "as_expected": not v["ok"] and "exact" in v["failed"] and naive is False}


# ---------------------------------------------------------------- shards (docs/scaling.md)

def _replay_shard(model, sequences: list, block: int, direction: tuple) -> tuple[float, list, fmpq | None]:
    """The replay with the binary64 analysis on some sequences: seconds, the
    sorted projections after the separation layer, the float bound."""
    from tfcert.verify.float_analysis import Analysis
    from tfcert.verify.evaluate import Replay
    from tfcert.verify.floats import FORMATS
    from tfcert.verify.numbers import dot

    start = time.perf_counter()
    analysis = Analysis(model, sequences, FORMATS["binary64"])
    keys: list = []
    for step in Replay(model, sequences).steps():
        analysis.step(step)
        if step.block == block and step.layer == "sa":
            keys = sorted(dot(direction, x) for x in step.flat_after)
    analysis.finish()
    return time.perf_counter() - start, keys, analysis.bound


def shard_costs(shape: Shape, k: int) -> dict:
    """What verification sharded by sequence would cost: the replay with the
    binary64 analysis (the bulk of verify) on every sequence, then on each of
    k shards (tfcert/shards.py's split, balanced by tokens); the merge of the shards' sorted
    separation projections (heapq.merge, adjacent differences); whether the
    merge and the max of the shards' bounds give the unsharded answers."""
    from tfcert.construct.build import construct
    from tfcert.shards import split
    from tfcert.verify.formats import parse_document, read_dataset
    from tfcert.verify.numbers import parse_vector

    dataset = read_dataset(parse_document("dataset.json", random_dataset(*shape)))
    construction = construct(dataset)
    sep = next(c for p in construction.phases for c in p.claims if c["kind"] == "separation")
    direction = parse_vector(sep["direction"], dataset.d, "separation.direction")
    inputs = [p.input for p in dataset.pairs]
    full_s, full_keys, full_bound = _replay_shard(construction.model, inputs, sep["block"], direction)
    shards = [_replay_shard(construction.model, [inputs[j] for j in part], sep["block"], direction)
              for part in split([len(x) for x in inputs], k)]
    start = time.perf_counter()
    merged = list(heapq.merge(*(keys for _, keys, _ in shards)))
    least_gap = min((b - a for a, b in zip(merged, merged[1:])), default=None)
    merge_s = time.perf_counter() - start
    bounds = [b for _, _, b in shards]
    bound = None if None in bounds else max(bounds)
    return {"N": shape[0], "n": shape[1], "m": shape[2], "d": shape[3], "tokens": len(full_keys),
            "blocks": len(construction.model.blocks), "shards": k, "full_s": _r(full_s, 3),
            "shard_s": [_r(s, 3) for s, _, _ in shards], "merge_s": _r(merge_s),
            "merged_equals_full": merged == full_keys, "distinct": least_gap is None or least_gap > 0,
            "min_gap_as_claimed": str(least_gap) == str(sep["min_gap"]),
            "bound_full": None if full_bound is None else float(full_bound),
            "bound_equal": bound == full_bound}


def shard_speedup(shape: Shape, k: int) -> dict:
    """Whole processes, in one run: ``tfcert verify BUNDLE`` and ``tfcert
    verify BUNDLE --shards k`` (a local Dask cluster of k workers, its start
    included) on the shape's bundle; both must exit 0."""
    with tempfile.TemporaryDirectory(prefix="tfcert-bench-") as tmp:
        folder = Path(tmp)
        (folder / "dataset.json").write_bytes(random_dataset(*shape))
        run_phase("construct", folder)
        seconds = []
        for extra in ([], ["--shards", str(k)]):
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "tfcert", "-q", "verify", str(folder), "--limit",
                                   f"tokens={2**62 - 1}", *extra], capture_output=True, text=True)
            seconds.append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise RuntimeError(f"bench: tfcert verify {' '.join(extra)} exited {proc.returncode}:\n"
                                   f"{proc.stderr[-4000:]}")
    return {"one_process_s": _r(seconds[0], 3), "sharded_s": _r(seconds[1], 3),
            "speedup": round(seconds[0] / seconds[1], 3)}


# ---------------------------------------------------------------- pictures

def width_tradeoff(shape: Shape) -> list[dict]:
    """Blocks and parameters as --width packs more hats and snaps into each FF
    layer (4 units each; width 4·Σm is effectively unbounded)."""
    from tfcert.construct.build import construct
    from tfcert.verify.claims.size import parameters
    from tfcert.verify.formats import parse_document, read_dataset

    dataset = read_dataset(parse_document("dataset.json", random_dataset(*shape)))
    rows = []
    for width in (4, 8, 16, 48, 4 * dataset.total_outputs):
        model = construct(dataset, "hardmax", width).model
        rows.append({"width": width, "blocks": len(model.blocks), "parameters": parameters(model)})
    return rows


STAGES = (("construct", "construct (certify, verify)", "o"), ("verify", "verify (exact)", "s"),
          ("float64", "dense float64 forward", "^"), ("naive", "naive exact replay", "v"))


def width_figure(trade: list[dict]):
    """Blocks and parameters against --width, each in its own panel: the
    parameters fall by a few per block saved, so on twin axes the two
    curves coincide and one hides the other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6), sharex=True)
    widths = [r["width"] for r in trade]
    for i, (ax, key) in enumerate(zip(axes, ("blocks", "parameters"))):
        ax.plot(widths, [r[key] for r in trade], marker="os"[i], color=f"C{i}")
        ax.set(xscale="log", xlabel="--width (FF units per layer)", ylabel=key)
        ax.set_xticks(widths, [str(w) for w in widths])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    fig.suptitle("width trade-off (%s)" % label(SUITES["quick"][0]), fontsize=10)
    fig.tight_layout()
    return fig


def draw(rows: list[dict], fits: dict, trade: list[dict], out: Path) -> dict[str, str]:
    """scaling.png: work seconds against tokens, log-log, with the fitted
    N-series lines dashed; width.png: blocks and parameters against --width (width_figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    fit = fits["tokens"]
    for i, (stage, name, marker) in enumerate(STAGES):
        pts = sorted((r["tokens"], r[f"{stage}_work_s"]) for r in rows if r[f"{stage}_work_s"] is not None)
        if pts:
            ax.plot(*zip(*pts), marker=marker, linestyle="none", color=f"C{i}", label=name)
        if fit and stage in fit:  # the least-squares line of that slope through the series
            xs = np.array([r["tokens"] for r in series(rows, "N")], dtype=float)
            ys = np.array([max(r[f"{stage}_work_s"], 1e-6) for r in series(rows, "N")])
            at = np.mean(np.log(ys) - fit[stage] * np.log(xs))
            ax.plot(xs, np.exp(at) * xs ** fit[stage], linestyle="--", color=f"C{i}",
                    label=f"fit ∝ Σn^{fit[stage]:.2f}")
    ax.set(xscale="log", yscale="log", xlabel="tokens (Σn)", ylabel="seconds (the work, each phase its own process)",
           title="tfcert bench: exact certification against a float64 pass")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(out / "scaling.png", dpi=110)
    plt.close(fig)
    fig = width_figure(trade)
    fig.savefig(out / "width.png", dpi=110)
    plt.close(fig)
    return {"scaling": str(out / "scaling.png"), "width": str(out / "width.png")}


# ---------------------------------------------------------------- text

def _secs(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}s"


def shape_line(r: dict) -> str:
    """One line per shape: seconds, ratios, memory, bits."""
    naive = "— (capped or skipped)" if r["naive_s"] is None else \
        f"{r['naive_s']:.2f}s ({'interpolates' if r['naive_interpolates'] else 'MISSES'})"
    ratio = "—" if r["naive_over_verify"] is None else f"{r['naive_over_verify']:.1f}x"
    return (f"{label(shape_of(r))}: {r['tokens']} tokens, {r['blocks']} blocks; "
            f"construct {_secs(r['construct_s'])}, verify {_secs(r['verify_s'])} "
            f"({'ok' if r['verified'] else 'FAILED'}), float64 {_secs(r['float64_forward_s'])}, naive {naive}\n"
            f"    verify/float64 {r['verify_over_float64']:.1f}x, construct/float64 "
            f"{r['construct_over_float64']:.1f}x, naive/verify {ratio}; peak MiB construct "
            f"{r['construct_maxrss_mib']:.0f}, verify {r['verify_maxrss_mib']:.0f}, "
            f"float64 {r['float64_maxrss_mib']:.0f}; "
            f"bits model {r['model_numerator_bits']}/{r['model_denominator_bits']}, tokens "
            f"{r['token_numerator_bits'] or '—'}/{r['token_denominator_bits'] or '—'}")


def float_line(r: dict) -> str:
    """One line per shape: the certified bounds beside what numpy shows (own order / reversed)."""
    parts = []
    for fmt in ("binary64", "binary32"):
        b, rel = r[f"{fmt}_bound"], r[f"{fmt}_bound_rel"]
        certified = "no bound" if b is None else f"≤ {b:.2g} ({rel:.2g} relative)"
        seen = " / ".join("—" if v is None else f"{v:.2g}"
                          for v in (r[f"{fmt}_observed_numpy"], r[f"{fmt}_observed_reverse"]))
        parts.append(f"{fmt} {certified}, observed {seen}")
    return f"    max|w| {r['max_weight']:.3g}; " + "; ".join(parts)


def _say(prefix: str) -> Callable[[str], None]:
    """Progress lines on stderr (a long run's log; -q silences them)."""
    def say(text: str) -> None:
        if not quiet():
            print(f"bench {prefix}: {text}", file=sys.stderr, flush=True)
    return say


def _folder(out: str | Path) -> Path:
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{out}: cannot create: {exc.strerror or exc}") from None
    return path


# ---------------------------------------------------------------- the command

def run_bench(quick: bool, as_json: bool, out: str | Path = "tfcert-bench", shapes: list[str] | None = None,
              suites: list[str] | None = None, naive_cap: float = 120.0, shards: int | None = None) -> int:
    """Measure the chosen shapes; exit 0 when every bundle verifies, every
    naive verdict that finished agrees, and (``quick``) the naive replay
    finished on every shape and the corrupted model was refused by both."""
    if not naive_cap >= 0:
        raise InputError(f"--naive-cap {naive_cap}: expected seconds ≥ 0 (0 skips the naive replay)")
    from tfcert.verify.numbers import LIMITS

    LIMITS.tokens = 2**62 - 1  # the shapes are the sizes asked for: none is refused as too large
    if shards is not None:
        if shards < 1:
            raise InputError(f"--shards {shards}: expected at least 1 shard")
        default = [BASE["N"]]  # the shape docs/scaling.md quotes
        return run_shards(choose_shapes(shapes, suites, quick) if shapes or suites or quick else default,
                          shards, as_json)
    noops = [name for name in NOOP if name in (suites or ()) or quick and name == "noop-quick"]
    long = [(name, shape) for name in suites or () if name in ALONE for shape in SUITES[name]]
    rest = [name for name in suites or () if name not in ALONE]
    picked = choose_shapes(shapes, rest, quick) if rest or shapes or quick or not long else []
    folder = _folder(out)
    rows, noop_rows, alone = [], [], []
    with open(folder / "results.jsonl", "w") as log:
        for i, shape in enumerate(picked):
            rows.append(measure(shape, naive_cap, _say(f"[{i + 1}/{len(picked)}] {label(shape)}")))
            log.write(json.dumps(rows[-1]) + "\n")
            log.flush()
            if not as_json:
                print(shape_line(rows[-1]) + "\n" + float_line(rows[-1]), flush=True)
        for name in noops:
            noop_rows.append(noop_row(name, _say(name)))
            log.write(json.dumps(noop_rows[-1]) + "\n")
            log.flush()
            if not as_json:
                print(noop_line(noop_rows[-1]), flush=True)
        for i, (name, shape) in enumerate(long):
            alone.append(measure_alone(shape, ALONE[name], _say(f"[{i + 1}/{len(long)}] {name} {label(shape)}")))
            log.write(json.dumps(alone[-1]) + "\n")
            log.flush()
            if not as_json:
                first = next(r for (n, _), r in zip(long, alone) if n == name)
                print(alone_line(alone[-1], None if first is alone[-1] else first), flush=True)
    ok = all(r["verified"] for r in alone) and all(r["verified"] for r in noop_rows)
    if not rows:
        if as_json:
            from tfcert.report import json_text

            print(json_text({"results": [], "noop": noop_rows, "alone": alone,
                             "files": {"results": str(folder / "results.jsonl")}}))
        else:
            print(f"wrote {folder / 'results.jsonl'}")
        return 0 if ok else 1
    fits = exponents(rows)
    corrupted = corrupted_check(picked[0], naive_cap) if quick else None
    _say("width trade-off")(label(SUITES["quick"][0]))
    trade = width_tradeoff(SUITES["quick"][0])
    files = {**draw(rows, fits, trade, folder), "results": str(folder / "results.jsonl")}
    ok = ok and all(r["verified"] and r["naive_interpolates"] in (None, True) for r in rows)
    if quick:
        ok = ok and all(r["naive_interpolates"] is True for r in rows) and corrupted["as_expected"]
    if as_json:
        from tfcert.report import json_text

        print(json_text({"results": rows, "noop": noop_rows, "alone": alone, "exponents": fits, "corrupted": corrupted,
                         "width_tradeoff": trade, "files": files}))
    else:
        print(summary(fits, corrupted, trade, files))
    return 0 if ok else 1


def summary(fits: dict, corrupted: dict | None, trade: list[dict], files: dict) -> str:
    """The text after the shapes' lines: exponents, the corrupted-model check, width, files."""
    lines = []
    for x, fit in fits.items():
        if fit:
            lines.append(f"exponent in Σ{'n' if x == 'tokens' else 'm'} (work seconds over {', '.join(fit['over'])}): "
                         f"construct {fit['construct']:.2f}, verify {fit['verify']:.2f}")
    if corrupted:
        lines.append(f"corrupted model ({corrupted['shape']}, one snap weight + 1/2^20): verify "
                     f"{'holds' if corrupted['verified'] else 'fails ' + ', '.join(corrupted['failed_kinds'])}, "
                     f"naive replay {'interpolates' if corrupted['naive_interpolates'] else 'misses the targets'}"
                     f"{'' if corrupted['as_expected'] else ' — NOT AS EXPECTED'}")
    lines.append(f"width trade-off ({label(SUITES['quick'][0])}): " + ", ".join(
        f"width {r['width']} → {r['blocks']} blocks, {r['parameters']} parameters" for r in trade))
    lines.append(f"wrote {files['results']}, {files['scaling']} and {files['width']}")
    return "\n".join(lines)


def run_shards(picked: list[Shape], k: int, as_json: bool) -> int:
    """``--shards K``: shard_costs per shape and, with Dask installed, the
    whole-process speed-up of ``verify --shards K``; exit 0 when the merges
    give the unsharded answers."""
    import importlib.util

    dask = importlib.util.find_spec("distributed") is not None
    rows = []
    for i, shape in enumerate(picked):
        say = _say(f"[{i + 1}/{len(picked)}] {label(shape)}")
        say(f"replay on all sequences, then on {k} shards")
        rows.append(shard_costs(shape, k))
        r = rows[-1]
        if dask:
            say(f"tfcert verify, one process and --shards {k}")
            r.update(shard_speedup(shape, k))
        if not as_json:
            print(f"{label(shape)}: {r['tokens']} tokens, {r['blocks']} blocks; replay + binary64 analysis "
                  f"{r['full_s']:.2f}s, {k} shards " + " / ".join(f"{s:.2f}s" for s in r["shard_s"])
                  + f", merge {r['merge_s']:.4f}s; merged keys {'equal' if r['merged_equals_full'] else 'DIFFER'}, "
                  f"bound {'equal' if r['bound_equal'] else 'DIFFERS'}", flush=True)
            if dask:
                print(f"    tfcert verify (whole processes): one process {r['one_process_s']:.2f}s, --shards {k} "
                      f"{r['sharded_s']:.2f}s: {r['speedup']:.2f}x", flush=True)
    if as_json:
        from tfcert.report import json_text

        print(json_text({"shard_costs": rows}))
    ok = all(r["merged_equals_full"] and r["distinct"] and r["min_gap_as_claimed"] and r["bound_equal"] for r in rows)
    return 0 if ok else 1

