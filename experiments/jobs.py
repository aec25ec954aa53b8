"""A job: one bank of models (bank.py) with its tasks and training, and its results as records.

Jobs are plain data, so a grid can be run here one job after another (``tfcert experiment``)
or as parallel processes on a GPU (sweep.py), and summarised later from the records alone. A
record is one trained model: its tags (what the experiment needs to group it: D, head pattern,
variant …), its architecture, parameter count, T, seed, held-out NMSE and NMSE curve, steps and
seconds. Nothing here imports InfoFlow (z3): predictions are attached when summarising.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from tfcert.experiments.bank import Bank, Member, Shape
from tfcert.experiments.targets import Task, intrinsic_task, pairwise_task, triangle_task
from tfcert.experiments.train import Log, TrainConfig, train_bank

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class TaskSpec:
    """A task by name, so jobs stay plain data: ``intrinsic`` (columns D = 1..D_max),
    ``pairwise`` (d), ``triangle``."""

    kind: str
    T: int
    D_max: int = 6
    d: int = 2
    scale: float = 1.0

    def build(self) -> Task:
        if self.kind == "intrinsic":
            return intrinsic_task(self.T, self.D_max, self.scale)
        if self.kind == "pairwise":
            return pairwise_task(self.T, self.d)
        if self.kind == "triangle":
            return triangle_task(self.T)
        raise ValueError(f"unknown task kind {self.kind!r}")


@dataclass(frozen=True)
class Job:
    experiment: str
    name: str
    shape: Shape
    members: tuple[Member, ...]
    tags: tuple[dict, ...]  # one per member: how the experiment groups it
    tasks: tuple[TaskSpec, ...]
    streams: tuple[int, ...]  # data seeds
    train: TrainConfig
    dtype: str = "float32"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert len(self.tags) == len(self.members), "one tag per member"


def run_job(job: Job, device: torch.device, log: Log, deadline: float | None = None) -> list[dict]:
    """Train the job's bank; one record per member."""
    start = time.perf_counter()
    bank = Bank(job.shape, job.members, device, DTYPES[job.dtype])
    tasks = tuple(t.build() for t in job.tasks)
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
