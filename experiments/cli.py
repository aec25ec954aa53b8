"""``tfcert experiment intrinsic-dim | triangle``: train small transformers and print the
measured NMSE beside InfoFlow's prediction.

Importing this module must not import torch (the main CLI imports it on every start): torch is
imported inside the command, and its absence is one ``error:`` line (exit 2).
"""
from __future__ import annotations

import argparse
import os
from importlib import import_module
from pathlib import Path

from tfcert.errors import InputError

MODULES = {"intrinsic-dim": "intrinsic_dim", "triangle": "triangle"}
NEED_TORCH = "the experiments need PyTorch: pip install torch==2.13.0 (the CPU build; any torch >= 2.1 works)"




def _device(torch, name: str):
    if name == "cuda" and not torch.cuda.is_available():
        raise InputError("--device: CUDA is not available here (this torch build or machine has no GPU)")
    if name == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # The models are tiny: intra-op threads cost more in synchronisation than they save, and
        # collapse (10x slower) when the cores are shared. OMP_NUM_THREADS overrides.
        torch.set_num_threads(1)
    return torch.device(name)


def _run(args: argparse.Namespace) -> int:
    if args.seed < 0:
        raise InputError(f"--seed: must be an integer >= 0, got {args.seed}")
    try:
        import torch
    except ImportError:
        raise InputError(NEED_TORCH) from None
    from tfcert.experiments.report import table, write
    from tfcert.progress import Status
    from tfcert.report import json_text

    device = _device(torch, args.device)
    module = import_module(f"tfcert.experiments.{MODULES[args.experiment]}")
    with Status("experiment") as status:  # training progress: one redrawn line on a terminal
        result = module.run(module.QUICK if args.quick else module.FULL, args.seed, device, status.line)
    doc = write(result, Path(args.out), "D" if args.experiment == "intrinsic-dim" else "T", module.series)
    if args.json:
        print(json_text(doc))
    else:
        print(table(result))
        print(f"\nwrote {doc['files']['png']} and {doc['files']['json']}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("experiment", help="train small transformers to test InfoFlow's predictions")
    kinds = p.add_subparsers(dest="experiment", required=True)
    for name, help_text in (("intrinsic-dim", "(D, D) heads against (D-1, D) on a target of intrinsic dimension D"),
                            ("triangle", "NMSE against T on the triangle-centre target")):
        q = kinds.add_parser(name, help=help_text)
        q.add_argument("--quick", action="store_true", help="a small grid that runs in about a minute on 2 CPU cores")
        q.add_argument("--out", default="tfcert-experiments", metavar="DIR",
                       help=f"where {name}.png and {name}.json go (default tfcert-experiments)")
        q.add_argument("--json", action="store_true", help="print one JSON document on stdout")
        q.add_argument("--seed", type=int, default=0, help="seed of initialisation and data (default 0)")
        q.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to train (default cpu)")
        q.set_defaults(func=_run)
