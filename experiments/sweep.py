"""Run the full jobs of every experiment as parallel processes on one device, writing as it goes.

    python -m tfcert.experiments.sweep --out DIR --device cuda --budget 400 [--only NAME …] [--tiny]

Each job (one bank of models, jobs.py) runs in its own process (``--worker I``), at most
``--processes`` at once. Measured on one H200 (docs/experiments.md): 16 processes time-slicing
the GPU ran the largest banks at 0.2–0.3 s a step — each step is hundreds of small kernels, and
the contexts take turns — so give the big banks the GPU to themselves or few neighbours. Every process gets the same
wall-clock deadline (``--budget`` seconds from the start, less a margin) and cuts its step count
to meet it (train.py; the records say how many steps ran). The parent merges what the workers
have written, every few seconds and at the end, into DIR/records.jsonl — a ``{"sweep": …}``
header (commit, hardware, wall time, job states) then one record per trained model — and the
workers' logs into DIR/log.txt, so whatever finished is there even if the run is cut short.
``tfcert experiment NAME --from DIR/records.jsonl`` turns them into tables.

``--pause``: at the deadline a job stops instead of cutting its steps, and writes its whole
training state (parameters, Adam moments, data generators, curve: DIR/state/JOB.pt, a few
hundred kB per CPU-grid job); ``--resume`` continues it from there, step for step as if it had
never stopped. So a schedule longer than one sitting (or one session of a machine) is trained
in several, and DIR can be committed between them.

``--tiny`` shrinks every job's training (steps, batch, held-out set) to test the machinery on a
CPU in seconds; its numbers mean nothing.

This module imports torch but not z3 (no InfoFlow): a machine with torch can run it from a copy
of the source tree (``PYTHONPATH`` pointing at a folder holding ``tfcert/``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from importlib import import_module
from pathlib import Path

from tfcert.experiments.intrinsic_dim import GRIDS, grid_jobs

EXPERIMENTS = ("intrinsic_dim", "cost_law", "depth", "triangle")
MARGIN = 25.0  # seconds kept free at the end: the last checkpoint, the records, the merge


def all_jobs(only: tuple[str, ...], tiny: bool, seed: int = 0, grid: str | None = None) -> list:
    """Every full job of the experiments named in ``only`` (all if empty), or the jobs of one
    intrinsic-dimension grid (``--grid``)."""
    if grid is not None:
        jobs = grid_jobs(grid, seed)
    else:
        jobs = [j for name in EXPERIMENTS for j in _full_jobs(name, only, seed)]
    if tiny:
        jobs = [replace(j, train=replace(j.train, steps=60, batch=8, eval_size=256, log_every=20, checkpoints=2))
                for j in jobs]
    return jobs


def _full_jobs(name: str, only: tuple[str, ...], seed: int) -> list:
    module = import_module(f"tfcert.experiments.{name}")
    return [] if only and module.NAME not in only else module.jobs(False, seed)


PAUSED = 3  # a worker's exit status when its job paused at the deadline (--pause)


def state_file(out: Path, job_name: str) -> Path:
    """Where a paused job's state lives: DIR/state/ and the job's name in safe characters."""
    return out / "state" / (re.sub(r"[^A-Za-z0-9]+", "-", job_name).strip("-") + ".pt")


def worker(index: int, args: argparse.Namespace) -> int:
    import torch

    from tfcert.experiments.jobs import load_state, run_job, save_state

    torch.backends.cuda.matmul.allow_tf32 = False  # full float32: the NMSE goes down to 1e-5
    torch.backends.cudnn.allow_tf32 = False
    if args.device == "cpu":
        torch.set_num_threads(1)
    job = _jobs(args)[index]
    parts = Path(args.parts)
    log_file = open(parts / f"{index}.log", "a", buffering=1)

    def log(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", file=log_file)
    deadline = time.perf_counter() + (args.deadline - time.time())
    saved = state_file(Path(args.out), job.name)
    try:
        resume = load_state(saved) if args.resume and saved.exists() else None
        if resume is not None:
            log(f"{job.name}: continuing from step {resume['training']['step']} ({saved})")
        records = run_job(job, torch.device(args.device), log, deadline, args.pause, resume)
    except Exception as exc:  # noqa: BLE001 - reported in the log and the header, the sweep goes on
        log(f"FAILED: {type(exc).__name__}: {exc}")
        raise
    if isinstance(records, dict):  # paused
        saved.parent.mkdir(exist_ok=True)
        save_state(records, saved)
        step, steps = records["training"]["step"], records["training"]["steps"]
        (parts / f"{index}.paused").write_text(json.dumps([step, steps]))
        log(f"paused at step {step}/{steps}: state in {saved}")
        return PAUSED
    tmp = parts / f"{index}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    tmp.rename(parts / f"{index}.jsonl")
    log(f"done: {len(records)} records")
    return 0


def _jobs(args: argparse.Namespace) -> list:
    return all_jobs(tuple(args.only), args.tiny, grid=args.grid)


def _earlier(out: Path) -> list[str]:
    """The record lines of an earlier run in DIR/records.jsonl (``--resume``)."""
    path = out / "records.jsonl"
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return [line for line in lines if "sweep" not in json.loads(line)]


def _merge(out: Path, parts: Path, header: dict, n: int, earlier: list[str]) -> None:
    lines = [json.dumps({"sweep": header}), *earlier]
    for i in range(n):
        f = parts / f"{i}.jsonl"
        if f.exists():
            lines += [line for line in f.read_text().splitlines() if line.strip()]
    tmp = out / "records.jsonl.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.rename(out / "records.jsonl")
    logs = []
    for i in range(n):
        f = parts / f"{i}.log"
        if f.exists():
            text = f.read_text().splitlines()
            logs += [f"== job {i} ==", *(text if len(text) <= 80 else [*text[:20], "…", *text[-59:]])]
    (out / "log.txt").write_text("\n".join(logs) + "\n")


def parent(args: argparse.Namespace) -> int:
    start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = Path(tempfile.mkdtemp(prefix="tfcert-sweep-"))
    jobs = _jobs(args)
    earlier = _earlier(out) if args.resume else []
    done = {json.loads(line)["job"] for line in earlier}
    deadline = start + args.budget - MARGIN
    header = {"commit": args.commit, "device": args.device, "hardware": _hardware(args.device),
              "budget_seconds": args.budget, "tiny": args.tiny, "grid": args.grid,
              "jobs": [{"name": j.name, "members": len(j.members),
                        "state": "done earlier" if j.name in done else "waiting"} for j in jobs]}
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    running: dict[int, subprocess.Popen] = {}
    waiting = [i for i, j in enumerate(jobs) if j.name not in done]
    while waiting or running:
        while waiting and len(running) < args.processes:
            i = waiting.pop(0)
            cmd = [sys.executable, "-m", "tfcert.experiments.sweep", "--worker", str(i), "--parts", str(parts),
                   "--deadline", str(deadline), "--device", args.device, "--out", str(out),
                   *(["--tiny"] if args.tiny else []), *(["--pause"] if args.pause else []),
                   *(["--resume"] if args.resume else []),
                   *(["--grid", args.grid] if args.grid else []),
                   *sum((["--only", o] for o in args.only), [])]
            running[i] = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                          stderr=open(parts / f"{i}.err", "w"))
            header["jobs"][i]["state"] = "running"
        time.sleep(0.5 if args.tiny else 5)
        for i, p in list(running.items()):
            if p.poll() is not None:
                header["jobs"][i]["state"] = "done" if p.returncode == 0 else f"failed ({p.returncode})"
                if p.returncode == PAUSED:
                    step, steps = json.loads((parts / f"{i}.paused").read_text())
                    header["jobs"][i]["state"] = f"paused at step {step} of {steps}"
                elif p.returncode:
                    err = (parts / f"{i}.err").read_text()[-2000:]
                    header["jobs"][i]["error"] = err
                    print(f"job {i} {jobs[i].name} failed:\n{err}", file=sys.stderr)
                del running[i]
        header["wall_seconds"] = round(time.time() - start, 1)
        _merge(out, parts, header, len(jobs), earlier)
    header["wall_seconds"] = round(time.time() - start, 1)
    _merge(out, parts, header, len(jobs), earlier)
    for i, job in enumerate(jobs):  # a finished job's records are in DIR now: its state is spent
        if header["jobs"][i]["state"] == "done" and state_file(out, job.name).exists():
            state_file(out, job.name).unlink()
    paused = sum(j["state"].startswith("paused") for j in header["jobs"])
    print(f"sweep: {len(jobs)} jobs in {header['wall_seconds']} s; "
          f"{sum(j['state'].startswith('done') for j in header['jobs'])} done"
          + (f", {paused} paused (go on with --resume)" if paused else "") + f"; wrote {out / 'records.jsonl'}")
    return 0 if all(j["state"].startswith(("done", "paused")) for j in header["jobs"]) else 1


def _hardware(device: str) -> str:
    import platform

    import torch
    if device == "cuda":
        return f"{torch.cuda.get_device_name(0)}, {os.cpu_count()} CPUs, torch {torch.__version__}"
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tfcert.experiments.sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="tfcert-sweep")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    p.add_argument("--budget", type=float, default=400.0, help="wall-clock seconds for the whole sweep")
    p.add_argument("--processes", type=int, default=16, help="jobs run at once")
    p.add_argument("--only", action="append", default=[], help="an experiment name (repeatable)")
    p.add_argument("--tiny", action="store_true", help="test the machinery: a few steps per job")
    p.add_argument("--grid", choices=GRIDS, help="run only this intrinsic-dimension grid: cpu (D = 2, 3, one job "
                                                 "per T and seed) or gpu (D = 2..6, one bank)")
    p.add_argument("--resume", action="store_true",
                   help="keep the records already in DIR/records.jsonl and run only the jobs they lack, "
                        "continuing each paused one from its state in DIR/state/")
    p.add_argument("--pause", action="store_true",
                   help="at the deadline, pause each job (its state in DIR/state/) instead of cutting its steps")
    p.add_argument("--commit", default=None, help="the commit of the source tree, for the header")
    p.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    p.add_argument("--parts", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    return worker(args.worker, args) if args.worker is not None else parent(args)


if __name__ == "__main__":
    sys.exit(main())
