"""bench_scaling's queries, each run by the code of this tree and by an older one, interleaved
(so both see the same load on a shared machine); the least wall time of REPS runs each.

Run: ``python tests/infoflow/bench_before_after.py OLD_TREE [REPS]``, OLD_TREE a package tree of
the older code (a directory with ``tfcert/`` laid out as installed: ``tfcert/infoflow`` etc.)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_scaling import QUERIES


def run(args: list[str], env: dict) -> tuple[float, int]:
    """Seconds and peak resident MB of ``tfcert infoflow ARGS --json`` in a child process."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "tfcert", "infoflow", *args, "--json"],
                             stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"tfcert infoflow {' '.join(args)} failed")
    return time.perf_counter() - start, usage.ru_maxrss // 1024


def main() -> None:
    old = {**os.environ, "PYTHONPATH": sys.argv[1]}
    new = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    with tempfile.TemporaryDirectory() as tmp:
        flat = Path(tmp) / "flat200.json"
        flat.write_text(json.dumps({"name": "flat200", "comparisons": [
            {"name": f"c{i}", "order": 2} for i in range(200)]}))
        for query in QUERIES:
            args = query.replace("FLAT200", str(flat)).split()
            before, after = [], []
            for _ in range(reps):
                before.append(run(args, old))
                after.append(run(args, new))
            (b, bm), (a, am) = min(before), min(after)
            print(f"before {b:6.2f} s {bm:4d} MB  after {a:6.2f} s {am:4d} MB  "
                  f"ratio {a / b:.2f}  {query}", flush=True)


if __name__ == "__main__":
    main()
