"""The cost table of docs/certificates.md ("A second solver") for the bundles in certificates/.

Run: ``python tests/cross_check_cost.py`` (needs cvc5). Per bundle: the queries verify asks (and
how many distinct), the median of 3 whole runs of ``tfcert -q verify B`` without and with
``--cross-check cvc5``, and the seconds z3 and cvc5 take on the distinct emitted queries."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import z3

from tfcert.cli.smt import cvc5_answer

REPO = Path(__file__).resolve().parent.parent


def seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tfcert", "-q", *argv], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    print("bundle                 queries (distinct)  verify z3 only  cross-checked  z3      cvc5")
    for folder in sorted(p for p in (REPO / "certificates").iterdir() if p.is_dir()):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "q"
            seconds(["verify", str(folder), "--emit-smt", str(out)])
            index = json.loads((out / "index.json").read_text())["queries"]
            texts = sorted({(out / q["file"]).read_text() for q in index})
        plain = statistics.median(seconds(["verify", str(folder)]) for _ in range(3))
        crossed = statistics.median(seconds(["verify", str(folder), "--cross-check", "cvc5"]) for _ in range(3))
        start = time.perf_counter()
        for text in texts:
            solver = z3.Solver()
            solver.from_string(text)
            solver.check()
        z3_s = time.perf_counter() - start
        start = time.perf_counter()
        for text in texts:
            cvc5_answer(text, 60)
        cvc5_s = time.perf_counter() - start
        print(f"{folder.name:22s} {len(index):4d} ({len(texts):3d})          {plain:5.2f} s         "
              f"{crossed:5.2f} s        {z3_s:5.2f} s  {cvc5_s:5.2f} s")


if __name__ == "__main__":
    main()
