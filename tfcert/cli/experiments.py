"""``tfcert experiment intrinsic-dim | cost-law | depth | triangle``: train small transformers
and print the measured NMSE beside InfoFlow's prediction, the agreement criterion and a verdict.
``tfcert experiment regularization --dataset D``: train the construction's architecture on D with
a set loss plus ε‖θ‖², against the bound ε‖θ_c‖² of the certified interpolant.

Importing this module must not import torch (the main CLI imports it on every start): torch is
imported inside the command, and its absence is one ``error:`` line (exit 2). ``--from FILE``
summarises the records of an earlier run (a ``sweep.py`` output) instead of training, and needs
no torch.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from importlib import import_module
from pathlib import Path

from tfcert.errors import InputError

MODULES = {"intrinsic-dim": "intrinsic_dim", "cost-law": "cost_law", "depth": "depth", "triangle": "triangle"}
HELP = {"intrinsic-dim": "heads per layer against a target of D pairwise comparisons (D = 2..6)",
        "cost-law": "NMSE against parameter count over MLP widths, beside InfoFlow's exponent",
        "depth": "one layer against two at equal parameter count on pairwise-min, growing T",
        "triangle": "NMSE against T on the triangle-centre target"}
REGULARIZATION_HELP = ("train the construction's architecture on a dataset with set loss + eps*|theta|^2 over a "
                       "sweep of eps, against the bound eps*|theta_c|^2 of the certified interpolant")
NEED_TORCH = "the experiments need PyTorch: pip install torch==2.13.0 (the CPU build; any torch >= 2.1 works)"


def _log(line: str) -> None:
    """Training progress on stderr — only on a terminal, and not with --quiet."""
    from tfcert.progress import enabled

    if enabled():
        print(line, file=sys.stderr, flush=True)


def _device(torch, name: str):
    if name == "cuda" and not torch.cuda.is_available():
        raise InputError("--device: CUDA is not available here (this torch build or machine has no GPU)")
    if name == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # The models are tiny: intra-op threads cost more in synchronisation than they save, and
        # collapse (10x slower) when the cores are shared. OMP_NUM_THREADS overrides.
        torch.set_num_threads(1)
    return torch.device(name)


def commit() -> str | None:
    """The git commit of this source tree, if it is a checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def hardware(torch, device) -> str:
    if str(device).startswith("cuda"):
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}"


META = ("commit", "hardware", "wall_seconds", "budget_seconds", "jobs", "runner")


def read_records(path: str) -> tuple[list[dict], dict]:
    """A sweep's records file (JSON lines: records plus at most one ``{"sweep": …}`` header), or
    a result document this command wrote (its ``records`` and provenance)."""
    records, meta = [], {}
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputError(f"--from: cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("records"), list):
        return doc["records"], {k: doc[k] for k in META if k in doc}
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"--from: {path}: line {n}: not JSON ({exc.msg.removesuffix(' at')})") from None
        if isinstance(obj, dict) and "sweep" in obj:
            meta = obj["sweep"]
        elif isinstance(obj, dict) and "experiment" in obj and "nmse" in obj:
            records.append(obj)
        else:
            raise InputError(f"--from: {path}: line {n}: neither a record nor a sweep header")
    return records, meta


def _run(args: argparse.Namespace) -> int:
    if args.seed < 0:
        raise InputError(f"--seed: must be an integer >= 0, got {args.seed}")
    from tfcert.experiments.report import check_writable

    module = import_module(f"tfcert.experiments.{MODULES[args.experiment]}")
    out = Path(args.out)
    start = time.perf_counter()
    if args.from_file:
        records, meta = read_records(args.from_file)
        records = [r for r in records if r["experiment"] == module.NAME and r.get("quick", False) == args.quick]
        if not records:
            raise InputError(f"--from: {args.from_file} holds no {'quick ' if args.quick else ''}"
                             f"{module.NAME} records")
        check_writable(out)
        device = meta.get("hardware") or records[0].get("device", "unknown device")
    else:
        try:
            import torch
        except ImportError:
            raise InputError(NEED_TORCH) from None
        from tfcert.experiments import jobs

        dev = _device(torch, args.device)
        check_writable(out)  # before anything is trained
        records = []
        for job in module.jobs(args.quick, args.seed):
            records += [{**r, "quick": args.quick} for r in jobs.run_job(job, dev, _log)]
        device = hardware(torch, dev)
        meta = {"commit": commit(), "hardware": device, "wall_seconds": round(time.perf_counter() - start, 1)}
    result = module.summarise(records, args.quick, device)
    return _finish(result, out, meta, args.json)


def _finish(result, out: Path, meta: dict, as_json: bool) -> int:
    """Write DIR/<name>.png and .json; print the JSON document or the tables."""
    from tfcert.experiments.report import text, write
    from tfcert.report import json_text

    doc = write(result, out, meta)
    if as_json:
        print(json_text(doc))
    else:
        print(text(result))
        print(f"\nwrote {doc['files']['png']} and {doc['files']['json']}")
    return 0


def _run_regularization(args: argparse.Namespace) -> int:
    if args.seed < 0:
        raise InputError(f"--seed: must be an integer >= 0, got {args.seed}")
    try:
        import torch
    except ImportError:
        raise InputError(NEED_TORCH) from None
    from tfcert.experiments import regularization
    from tfcert.experiments.report import check_writable

    start = time.perf_counter()
    dev = _device(torch, "cpu")
    problem = regularization.prepare(args.dataset)  # a bad dataset is refused before --out is touched
    out = Path(args.out)
    check_writable(out)  # before anything is trained
    plan = regularization.QUICK if args.quick else regularization.FULL
    records = regularization.run(problem, plan, args.seed, _log)
    device = hardware(torch, dev)
    meta = {"commit": commit(), "hardware": device, "wall_seconds": round(time.perf_counter() - start, 1)}
    return _finish(regularization.summarise(records, args.quick, device), out, meta, args.json)


def register(sub) -> None:
    p = sub.add_parser("experiment", help="train small transformers to test InfoFlow's predictions "
                                          "and the regularization bound of the exact-interpolation paper")
    kinds = p.add_subparsers(dest="experiment", required=True)
    for name, help_text in HELP.items():
        q = kinds.add_parser(name, help=help_text)
        q.add_argument("--quick", action="store_true",
                       help="a small case that runs in well under a minute on a CPU (CI); says what it cannot show")
        q.add_argument("--out", default="tfcert-experiments", metavar="DIR",
                       help=f"where {name}.png and {name}.json go (default tfcert-experiments)")
        q.add_argument("--json", action="store_true", help="print one JSON document on stdout")
        q.add_argument("--seed", type=int, default=0,
                       help="seed of initialisation and data; the full grids use seeds S, S+1, S+2 (default 0)")
        q.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to train (default cpu)")
        q.add_argument("--from", dest="from_file", metavar="RECORDS",
                       help="summarise the records of an earlier run (JSON lines from "
                            "python -m tfcert.experiments.sweep, or a JSON document this command wrote) "
                            "instead of training")
        q.set_defaults(func=_run)
    q = kinds.add_parser("regularization", help=REGULARIZATION_HELP)
    q.add_argument("--dataset", required=True, metavar="D", help="the dataset (tfcert.dataset/1) to train on")
    q.add_argument("--quick", action="store_true",
                   help="four eps, 1000 steps: about 15 seconds on a CPU (CI); says what it cannot show")
    q.add_argument("--out", default="tfcert-experiments", metavar="DIR",
                   help="where regularization.png and regularization.json go (default tfcert-experiments)")
    q.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    q.add_argument("--seed", type=int, default=0,
                   help="seed of the random starts: S (quick) or S, S+1, S+2 (default 0)")
    q.set_defaults(func=_run_regularization)
