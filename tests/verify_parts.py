"""Where verify's time goes, part by part, in one process (docs/scaling.md).

Run: ``python tests/verify_parts.py FOLDER [--build N,n,m,d] [--parts load,replay,analysis,check]``.
With ``--build`` a missing FOLDER is filled first: the dataset
``tfcert.bench.bench.random_dataset(N, n, m, d)`` and its bundle (as ``tfcert bench`` builds it,
``python -m tfcert.bench.benchphase construct``). Prints one JSON line: seconds to read and
parse the three files (``load``: load_document ×3; ``read``: read_model and read_dataset),
the exact replay alone (``replay``), the replay with the binary64 float analysis beside it
(``analysis``, its bound, the analysis's own seconds, its four slowest layers and three slowest
runs of 100 blocks, and the tokens it takes through an FF layer's bound in full, ``_ff_token``:
their count and seconds), and the whole check (``check``: check_certificate on the documents
read, with each claim kind's seconds). Compare two checkouts by running each one's copy in
turn (interleaved), on the same folder.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from tfcert.verify.numbers import LIMITS


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--build", help="N,n,m,d: build the bundle into FOLDER when it holds none")
    parser.add_argument("--parts", default="load,replay,analysis,check")
    args = parser.parse_args()
    parts = args.parts.split(",")
    LIMITS.tokens = 2**62 - 1
    if args.build and not (args.folder / "certificate.json").exists():
        from tfcert.bench.bench import random_dataset

        args.folder.mkdir(parents=True, exist_ok=True)
        (args.folder / "dataset.json").write_bytes(random_dataset(*map(int, args.build.split(","))))
        subprocess.run([sys.executable, "-m", "tfcert.bench.benchphase", "construct", str(args.folder)], check=True)

    from tfcert.verify.check import check_certificate
    from tfcert.verify.evaluate import Replay
    from tfcert.verify.float_analysis import Analysis
    from tfcert.verify.floats import FORMATS
    from tfcert.verify.formats import load_document, read_dataset, read_model

    out: dict = {}

    def timed(name: str, work):
        start = time.perf_counter()
        value = work()
        out[name] = round(time.perf_counter() - start, 2)
        return value

    docs = timed("load", lambda: [load_document(args.folder / f) for f in ("model.json", "dataset.json",
                                                                            "certificate.json")])
    model, dataset = timed("read", lambda: (read_model(docs[0]), read_dataset(docs[1])))
    inputs = [p.input for p in dataset.pairs]
    if "replay" in parts:
        timed("replay", lambda: [None for _ in Replay(model, inputs).steps()])
    if "analysis" in parts:
        layers: list[tuple[float, str]] = []
        hundreds: dict[int, float] = defaultdict(float)
        full = [0, 0.0]  # tokens through _ff_token, their seconds
        whole = Analysis._ff_token

        def ff_token(self, *args):
            start = time.perf_counter()
            try:
                return whole(self, *args)
            finally:
                full[0], full[1] = full[0] + 1, full[1] + time.perf_counter() - start
        Analysis._ff_token = ff_token

        def analysed():
            analysis = Analysis(model, inputs, FORMATS["binary64"])
            for step in Replay(model, inputs).steps():
                start = time.perf_counter()
                analysis.step(step)
                layers.append((time.perf_counter() - start, f"block {step.block} {step.layer}"))
                hundreds[step.block // 100] += layers[-1][0]
            analysis.finish()
            return analysis
        analysis = timed("analysis", analysed)
        out["bound"] = str(analysis.bound) if analysis.failure is None else analysis.failure
        out["analysis_alone"] = round(sum(s for s, _ in layers), 2)
        out["slowest_layers"] = {where: round(s, 2) for s, where in sorted(layers, reverse=True)[:4]}
        out["slowest_100_blocks"] = {f"blocks {100 * k}-{100 * k + 99}": round(s, 2) for k, s in
                                     sorted(hundreds.items(), key=lambda item: item[1], reverse=True)[:3]}
        out["ff_tokens"] = {"count": full[0], "seconds": round(full[1], 2)}
        Analysis._ff_token = whole
    if "check" in parts:
        report = timed("check", lambda: check_certificate(*docs))
        out["ok"] = report.ok
        kinds: dict[str, float] = defaultdict(float)
        for r in report.results:
            kinds[r.kind] += r.seconds
        out["claims"] = {k: round(v, 2) for k, v in kinds.items() if v >= 0.005}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    from tfcert.process import rare_collection

    with rare_collection():  # the garbage collector's pace of a tfcert process
        sys.exit(main())
