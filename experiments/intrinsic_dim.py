"""Intrinsic-dimension experiment: (h1, h2) = (D, D) against one head fewer in layer 1.

InfoFlow: the target's D pairwise comparisons each need their own anchoring head in layer 1,
so (D, D) has a T-bounded cost and (D−1, D) does not (its only route is decoding the whole
sequence, exponent T·d/E − 1). The seed reports NMSE ≈ 1e-5 against ≈ 1e-2…1e-3, whatever T.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import torch

from tfcert.experiments.model import ModelConfig
from tfcert.experiments.prediction import least_heads, predicted
from tfcert.experiments.report import Result, Row
from tfcert.experiments.targets import INTRINSIC_D_IN, intrinsic_dim, intrinsic_matrices
from tfcert.experiments.train import Log, TrainConfig, train

NAME = "intrinsic-dim"
MARGIN = 2.0  # the (D, D) model must be at least this factor below (D−1, D) to "agree"


@dataclass(frozen=True)
class Grid:
    dims: tuple[int, ...]
    lengths: tuple[int, ...]
    E: int
    train: TrainConfig
    quick: bool = False


QUICK = Grid(dims=(2, 3), lengths=(4, 8), E=32,
             train=TrainConfig(steps=150, batch=128, lr=3e-3, eval_size=2048, seed=0, log_every=50), quick=True)
FULL = Grid(dims=(2, 3, 4, 5, 6), lengths=(8, 16, 32), E=64,
            train=TrainConfig(steps=20000, batch=256, lr=2e-3, eval_size=16384, seed=0, log_every=1000))


def _heads(D: int) -> tuple[tuple[int, int], ...]:
    return ((D, D), (D - 1, D))


def _agrees(rows: list[Row]) -> list[Row]:
    """Pair each (D, D) row with its (D−1, D) row at the same D and T: both agree when the
    predicted-efficient model is at least MARGIN times better."""
    nmse = {(r.config["D"], r.T, tuple(r.config["heads"])): r.nmse for r in rows}

    def verdict(r: Row) -> bool:
        D = r.config["D"]
        return nmse[D, r.T, (D, D)] * MARGIN <= nmse[D, r.T, (D - 1, D)]
    return [replace(r, agrees=verdict(r)) for r in rows]


def run(grid: Grid, seed: int, device: torch.device, log: Log) -> Result:
    train_config = replace(grid.train, seed=seed)
    runs = [(D, T, heads) for D in grid.dims for T in grid.lengths for heads in _heads(D)]
    rows = []
    for i, (D, T, heads) in enumerate(runs, 1):
        target_name = f"{NAME}:D={D}"
        prediction = predicted(target_name, T, INTRINSIC_D_IN, grid.E, heads)
        fewest = least_heads(target_name, T, INTRINSIC_D_IN, grid.E)
        prediction = {**prediction, "min_heads": None if fewest is None else list(fewest),
                      "text": f"{prediction['text']}; min heads {fewest}"}
        model = ModelConfig(d=INTRINSIC_D_IN, E=grid.E, heads=heads)
        label = f"D={D} h={heads[0]},{heads[1]} E={grid.E}"
        M = intrinsic_matrices(D).to(device)
        result = train(model, partial(intrinsic_dim, M=M), T, train_config, device, log,
                       f"[{i}/{len(runs)}] {label} T={T}")
        log(f"[{i}/{len(runs)}] {label} T={T}: NMSE {result.nmse:.3e} ({result.seconds:.1f}s)")
        rows.append(Row(label, {"D": D, **model.to_json()}, T, result.nmse, prediction, None,
                        round(result.seconds, 2)))
    return Result(NAME, grid.quick, seed, str(device),
                  "(h1, h2) = (D, D) is the least head count with a T-bounded cost; "
                  "(D-1, D) must decode the whole sequence (exponent grows with T)",
                  f"NMSE(D, D) * {MARGIN:g} <= NMSE(D-1, D) at the same D and T",
                  tuple(_agrees(rows)))


def series(row: Row) -> str:
    """Plot lines: head pattern × T."""
    D, h1 = row.config["D"], row.config["heads"][0]
    return f"h=(D,D) T={row.T}" if h1 == D else f"h=(D-1,D) T={row.T}"
