"""Running a job (spec.py): one bank of models (bank.py) with its tasks and training, and its
results as records.

Jobs are plain data (spec.py), so a grid can be run here one job after another (``tfcert experiment``)
or as parallel processes on a GPU (sweep.py), and summarised later from the records alone. A
record is one trained model: its tags (what the experiment needs to group it: D, head pattern,
variant …), its architecture, parameter count, T, seed, held-out NMSE and NMSE curve, steps and
seconds. Nothing here imports InfoFlow (z3): predictions are attached when summarising.
"""
from __future__ import annotations

import time

import torch

from tfcert.experiments.bank import Bank
from tfcert.experiments.spec import Job, TaskSpec
from tfcert.experiments.targets import Task, intrinsic_task, pairwise_task, triangle_task
from tfcert.experiments.train import Log, train_bank

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def build_task(spec: TaskSpec) -> Task:
    """The torch task a ``TaskSpec`` names."""
    if spec.kind == "intrinsic":
        return intrinsic_task(spec.T, spec.D_max, spec.scale)
    if spec.kind == "pairwise":
        return pairwise_task(spec.T, spec.d)
    if spec.kind == "triangle":
        return triangle_task(spec.T)
    raise ValueError(f"unknown task kind {spec.kind!r}")


def run_job(job: Job, device: torch.device, log: Log, deadline: float | None = None) -> list[dict]:
    """Train the job's bank; one record per member."""
    start = time.perf_counter()
    bank = Bank(job.shape, job.members, device, DTYPES[job.dtype])
    tasks = tuple(build_task(t) for t in job.tasks)
    trained = train_bank(bank, tasks, job.streams, job.train, log, job.name, deadline)
    seconds = time.perf_counter() - start
    records = []
    for i, (m, tag) in enumerate(zip(job.members, job.tags)):
        task = job.tasks[m.task]
        records.append({
            "experiment": job.experiment, "job": job.name, **tag,
            "T": task.T, "task": task.kind, "scale": task.scale,
            "heads": list(m.heads), "hidden": list(m.hidden), "layers": len(m.heads),
            "seed": m.seed, "data_seed": job.streams[m.stream], "lr": m.lr,
            "parameters": m.parameters(job.shape), "shape": job.shape.to_json(), "dtype": job.dtype,
            "nmse": trained.nmse[i], "curve": [[s, v[i]] for s, v in trained.curve],
            "steps": trained.steps, "train": job.train.to_json(),
            "job_seconds": round(seconds, 2), "device": str(device)})
    return records
