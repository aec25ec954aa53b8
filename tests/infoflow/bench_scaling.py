"""The scaling table of docs/infoflow.md: wall time and peak memory of each CLI query.

Run: ``python tests/infoflow/bench_scaling.py`` (each query in a fresh process, ``--json``, so
proofs are included)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUERIES = [
    "min-heads --target intrinsic-dim:D=10 --layers 2 --T 64",
    "min-heads --target FLAT200 --layers 2 --T 64",
    "predict --target FLAT200 --heads 200,200 --T 64",
    "predict --target FLAT200 --heads 200,200,200,200 --T 64",
    "min-heads --target FLAT200 --layers 4 --T 64",
    "predict --target intrinsic-dim:D=6 --heads 6,6,6 --T 64",
    "predict --target intrinsic-dim:D=6 --heads 6,6,6,6 --T 64",
]


def run(args: list[str]) -> tuple[float, int]:
    """Seconds and peak resident MB of ``tfcert infoflow ARGS`` in a child process."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "tfcert", "infoflow", *args, "--json"],
                             stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)  # this child's own peak memory
    seconds = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"tfcert infoflow {' '.join(args)} failed")
    return seconds, usage.ru_maxrss // 1024


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        flat = Path(tmp) / "flat200.json"
        flat.write_text(json.dumps({"name": "flat200", "comparisons": [
            {"name": f"c{i}", "order": 2} for i in range(200)]}))
        for query in QUERIES:
            seconds, mb = run(query.replace("FLAT200", str(flat)).split())
            print(f"{seconds:6.2f} s  {mb:5d} MB  {query}", flush=True)


if __name__ == "__main__":
    main()
