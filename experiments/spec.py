"""What the experiments train, as plain data: bank shapes, members, tasks by name, training
configurations and jobs. Nothing here imports torch, so the grids, the records and the verdicts
(``summarise`` in each experiment) load without it; only training (bank.py, targets.py,
train.py, jobs.run_job) needs it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

INTRINSIC_D_IN = 4  # token dimension of the intrinsic-dimension target (targets.py)
TRIANGLE_D_IN = 2  # token dimension of the triangle-centre target

MLPS = ("relu", "bilinear")


@dataclass(frozen=True)
class Shape:
    """What every member of a bank shares (the padded sizes)."""

    d: int
    E: int
    layers: int
    heads: int  # heads per layer, the most any member uses
    head_dim: int = 8
    hidden: int = 256  # MLP width, the most any member uses
    mlp: str = "relu"
    init_scale: float = 1.0  # multiplies every initial weight and bias

    def __post_init__(self) -> None:
        if self.mlp not in MLPS:
            raise ValueError(f"mlp={self.mlp!r}: expected one of {MLPS}")

    def to_json(self) -> dict:
        return {"d": self.d, "E": self.E, "layers": self.layers, "heads": self.heads,
                "head_dim": self.head_dim, "hidden": self.hidden, "mlp": self.mlp, "init_scale": self.init_scale}


@dataclass(frozen=True)
class Member:
    """One model of a bank: heads and MLP width per layer (len(heads) = its depth), the seed of
    its initialisation, which task, data stream and target column it trains on, its rate."""

    heads: tuple[int, ...]
    hidden: tuple[int, ...]
    seed: int = 0
    task: int = 0  # index into the tasks the bank trains on (e.g. one per T)
    stream: int = 0  # index of the data stream (one per data seed)
    column: int = 0  # index of the task's output column
    lr: float = 2e-3

    def parameters(self, shape: Shape) -> int:
        """The parameter count of the model this member stands for."""
        E, a = shape.E, shape.head_dim
        n = shape.d * E + E + E + E + 1  # embedding, readout vector, linear read-out
        for h, f in zip(self.heads, self.hidden):
            n += 3 * (E * h * a + h * a) + h * a * E + E  # q, k, v, output projection
            n += (2 if shape.mlp == "relu" else 3) * E * f + f * (1 if shape.mlp == "relu" else 2) + E
        return n


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch: int
    eval_size: int
    warmup: float = 0.05  # fraction of the steps with a linear warm-up
    final: float = 0.01  # the cosine decays to this fraction of the rate
    clip: float = 1.0  # per-member gradient norm
    betas: tuple[float, float] = (0.9, 0.999)
    log_every: int = 100
    checkpoints: int = 4  # held-out NMSE at this many evenly spaced steps (the last is the result)

    def to_json(self) -> dict:
        return {"steps": self.steps, "batch": self.batch, "eval_size": self.eval_size,
                "warmup": self.warmup, "final": self.final, "clip": self.clip,
                "betas": list(self.betas)}


@dataclass(frozen=True)
class TaskSpec:
    """A task by name, so jobs stay plain data: ``intrinsic`` (columns D = 1..D_max),
    ``pairwise`` (d), ``triangle``."""

    kind: str
    T: int
    D_max: int = 6
    d: int = 2
    scale: float = 1.0


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
