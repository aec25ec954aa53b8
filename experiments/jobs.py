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
from pathlib import Path

import torch

from tfcert.experiments.bank import Bank
from tfcert.experiments.spec import Job, TaskSpec
from tfcert.experiments.targets import Task, intrinsic_task, pairwise_task, triangle_task
from tfcert.experiments.train import Log, Paused, train_bank

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


def run_job(job: Job, device: torch.device, log: Log, deadline: float | None = None,
            pause: bool = False, resume: dict | None = None) -> list[dict] | dict:
    """Train the job's bank; one record per member. With ``pause``, a deadline returns the
    job's state instead (``save_state`` writes it; ``resume`` is such a state read back)."""
    start = time.perf_counter()
    bank = Bank(job.shape, job.members, device, DTYPES[job.dtype])
    tasks = tuple(build_task(t) for t in job.tasks)
    if resume is not None:
        _check_state(job, resume)
    trained = train_bank(bank, tasks, job.streams, job.train, log, job.name, deadline, pause=pause,
                         resume=None if resume is None else Paused.from_json(resume["training"]))
    seconds = time.perf_counter() - start + (0.0 if resume is None else resume["job_seconds"])
    paused_at = ([] if resume is None else resume["paused_at"])
    if isinstance(trained, Paused):
        return {"job": job.name, "train": job.train.to_json(), "shape": job.shape.to_json(),
                "job_seconds": seconds, "paused_at": [*paused_at, trained.progress.step],
                "training": trained.to_json()}
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
            "job_seconds": round(seconds, 2), "device": str(device),
            **({"paused_at": paused_at} if paused_at else {})})
    return records


def save_state(state: dict, path: Path) -> None:
    """Write a paused job's state (``run_job``) whole or not at all."""
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def load_state(path: Path) -> dict:
    """A paused job's state as ``save_state`` wrote it (tensors, numbers and lists only)."""
    return torch.load(path, weights_only=True)


def _check_state(job: Job, state: dict) -> None:
    """A state continues only the job that wrote it: same name, shape and training settings."""
    for key, want in (("job", job.name), ("shape", job.shape.to_json()), ("train", job.train.to_json())):
        if state.get(key) != want:
            raise ValueError(f"the saved state is of another job: its {key} is {state.get(key)!r}, "
                             f"this job's is {want!r}")
