"""What small hostile files cost, as whole processes (docs/certificates.md, "What a size costs").

python tests/hostile_costs.py [CASE ...] [--tokens N] [--exponent E] [--quick]: builds four inputs that a red
team found, each a file of under 1 MB within the default limits, and times the command on each
(wall seconds and peak resident memory):

* ``convex``: one hardmax sequence of N tokens (1/q, 1/q²) in d = 2, q distinct primes above 10^9,
  A = I: every key lies on the hull of the others (a parabola), so the planar table leaves them
  all (the binary64 filter then leaves a few per query to score exactly);
* ``dense``: one hardmax sequence of N small-integer tokens in d = 3, A = I: no planar shortcut,
  only the binary64 filter;
* ``cluster``: one hardmax sequence of N tokens in d = 3 within 2^-70 of one point, A = I: keys
  that binary64 tells apart only by their differences from one of them;
* ``range``: a dataset of two sequences whose coordinates span 10^-E … 10^E, constructed: the
  compression maps 2E decades onto one scale, a block per factor of 4.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flint import fmpz


def _bundle(folder: Path, d: int, tokens: list[list[str]]) -> Path:
    """One sequence, a one-block hardmax model with A = V = I, and a certificate claiming exactness."""
    identity = {"scale": "1", "low_rank": []}
    model = {"format": "tfcert.model/1", "d": d, "attention": "hardmax", "blocks": [
        {"ff": {"eta": "1", "U": [], "b": [], "W": [[] for _ in range(d)]},
         "sa": {"rho": "1", "A": identity, "V": identity}}]}
    data = {"format": "tfcert.dataset/1", "d": d, "pairs": [{"input": tokens, "output": [tokens[0]]}]}
    files = {name: json.dumps(doc).encode() for name, doc in (("model.json", model), ("dataset.json", data))}
    certificate = {"format": "tfcert.certificate/1", "model_sha256": hashlib.sha256(files["model.json"]).hexdigest(),
                   "dataset_sha256": hashlib.sha256(files["dataset.json"]).hexdigest(), "attention": "hardmax",
                   "theorem": "1.6", "phases": [{"name": "p", "blocks": [0, 1], "claims": [{"kind": "exact"}]}]}
    files["certificate.json"] = json.dumps(certificate).encode()
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_bytes(text)
    return folder


def convex(folder: Path, n: int) -> Path:
    q, tokens = fmpz(10**9), []
    while len(tokens) < n:
        if q.is_prime():
            tokens.append([f"1/{q}", f"1/{q * q}"])
        q += 1
    return _bundle(folder, 2, tokens)


def dense(folder: Path, n: int) -> Path:
    return _bundle(folder, 3, [[str(k), str(k * k % 1009), str(k % 7)] for k in range(1, n + 1)])


def cluster(folder: Path, n: int) -> Path:
    rng = random.Random(0)
    centre = (7 * 2 ** 80, -3 * 2 ** 80, 5 * 2 ** 80)
    return _bundle(folder, 3, [[f"{c + rng.randint(-1000, 1000)}/{2 ** 80}" for c in centre] for _ in range(n)])


def wide_range(path: Path, e: int) -> Path:
    path.write_text(json.dumps({"format": "tfcert.dataset/1", "d": 2, "pairs": [
        {"input": [[f"1e{e}", f"1e-{e}"], [f"2e-{e}", f"3e{e - 1}"]], "output": [["1", f"1e-{e}"]]},
        {"input": [[f"7e-{e}", "1"], [f"1e{e}", f"1e{e}"]], "output": [[f"1e-{e}", f"-1e{e}"], ["5", "5"]]}]}))
    return path


def _timed(argv: list[str]) -> str:
    """Exit code, wall seconds and peak resident memory of ``tfcert -q ARGV`` as a whole process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tfcert", "-q", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return f"exit {os.waitstatus_to_exitcode(status)}, {wall:.1f} s, {usage.ru_maxrss / 1024:.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", metavar="CASE", help="convex, dense, cluster, range (default: all four)")
    p.add_argument("--tokens", type=int, default=10_000)
    p.add_argument("--exponent", type=int, default=4000)
    p.add_argument("--quick", action="store_true", help="100 tokens and 10^±100: that the script runs")
    args = p.parse_args(argv)
    if unknown := set(args.cases) - {"convex", "dense", "cluster", "range"}:
        p.error(f"unknown case {sorted(unknown)[0]!r}: choose from convex, dense, cluster, range")
    n, e = (100, 100) if args.quick else (args.tokens, args.exponent)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cases = args.cases or ["convex", "dense", "cluster", "range"]
        for name, make in (("convex", convex), ("dense", dense), ("cluster", cluster)):
            if name not in cases:
                continue
            folder = make(root / name, n)
            size = sum(f.stat().st_size for f in folder.iterdir())
            print(f"{name}: one sequence of {n} tokens, {size / 1e3:.0f} kB: "
                  f"tfcert verify: {_timed(['verify', str(folder)])}", flush=True)
        if "range" not in cases:
            return 0
        path = wide_range(root / "range.json", e)
        print(f"range: 10^-{e} … 10^{e}, {path.stat().st_size} bytes: tfcert construct: "
              f"{_timed(['construct', str(path), '-o', str(root / 'out')])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
