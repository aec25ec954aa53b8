"""Triangle-centre experiment: NMSE against T for fixed architectures.

InfoFlow: the target is one comparison of order 3; no retrieval route resolves it, so every
derivation decodes the whole sequence (exponent T·d/E − 1, growing with T) — no fixed
architecture is efficient, and the seed reports NMSE → 1 as T grows whatever the heads or E.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from tfcert.experiments.model import ModelConfig
from tfcert.experiments.prediction import predicted
from tfcert.experiments.report import Result, Row
from tfcert.experiments.targets import TRIANGLE_D_IN, triangle_center
from tfcert.experiments.train import Log, TrainConfig, train

NAME = "triangle"
TARGET = "triangle-center"


@dataclass(frozen=True)
class Grid:
    lengths: tuple[int, ...]
    models: tuple[tuple[tuple[int, int], int], ...]  # (heads, E)
    train: TrainConfig
    quick: bool = False


QUICK = Grid(lengths=(4, 8), models=(((2, 2), 32), ((4, 4), 32)),
             train=TrainConfig(steps=150, batch=128, lr=3e-3, eval_size=2048, seed=0, log_every=50), quick=True)
FULL = Grid(lengths=(4, 8, 16, 32), models=(((2, 2), 32), ((4, 4), 64), ((8, 8), 128)),
            train=TrainConfig(steps=20000, batch=256, lr=2e-3, eval_size=16384, seed=0, log_every=1000))


def _agrees(rows: list[Row]) -> list[Row]:
    """A row agrees when its NMSE is at least that of the same model at the shortest T (the
    reference row, which says nothing by itself)."""
    shortest: dict[str, Row] = {}
    for r in rows:
        if r.label not in shortest or r.T < shortest[r.label].T:
            shortest[r.label] = r
    return [replace(r, agrees=None if shortest[r.label] is r else r.nmse >= shortest[r.label].nmse)
            for r in rows]


def run(grid: Grid, seed: int, device: torch.device, log: Log) -> Result:
    train_config = replace(grid.train, seed=seed)
    runs = [(heads, E, T) for heads, E in grid.models for T in grid.lengths]
    rows = []
    for i, (heads, E, T) in enumerate(runs, 1):
        prediction = predicted(TARGET, T, TRIANGLE_D_IN, E, heads)
        model = ModelConfig(d=TRIANGLE_D_IN, E=E, heads=heads)
        label = f"h={heads[0]},{heads[1]} E={E}"
        result = train(model, triangle_center, T, train_config, device, log, f"[{i}/{len(runs)}] {label} T={T}")
        log(f"[{i}/{len(runs)}] {label} T={T}: NMSE {result.nmse:.3e} ({result.seconds:.1f}s)")
        rows.append(Row(label, model.to_json(), T, result.nmse, prediction, None, round(result.seconds, 2)))
    return Result(NAME, grid.quick, seed, str(device),
                  "no fixed architecture is efficient (order-3 comparison: exponent grows with T), "
                  "so NMSE should rise towards 1 as T grows",
                  "NMSE at this T >= NMSE of the same model at the shortest T", tuple(_agrees(rows)))


def series(row: Row) -> str:
    return row.label
