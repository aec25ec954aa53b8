"""Triangle-centre experiment: NMSE against T for fixed architectures.

InfoFlow: the target is one comparison of order 3; no retrieval route resolves it, so every
derivation decodes the whole sequence (exponent T·d/E − 1, clamped at 0) — no fixed
architecture is efficient, and the paper reports NMSE → 1 as T grows whatever the heads or E.
The verdict (verdict.py) holds the measured trend to the exponent of each exact architecture:
at h = (4, 4), E = 64 it is 0 at every T up to 32, so InfoFlow predicts no rise there. A harder task at longer T is no evidence by itself (any target gets harder); the contrast is
the depth experiment, where the order-2 pairwise-min stays learnable by two layers at every T.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from tfcert.experiments.report import Result, Series, Spread, Table, steps_text
from tfcert.experiments.spec import TRIANGLE_D_IN, Job, Member, Shape, TaskSpec, TrainConfig
from tfcert.experiments.verdict import CRITERION as VERDICT_RULE
from tfcert.experiments.verdict import Cell, judge, pairs, summary

NAME = "triangle"
TARGET = "triangle-center"
CLAIM = ("an order-3 comparison: every derivation decodes the whole sequence (exponent T*d/E - 1, clamped "
         "at 0), so NMSE should rise with T where the exponent does, and stay level where it does not")
CRITERION = "per model, the cells at each T: " + VERDICT_RULE


@dataclass(frozen=True)
class Model:
    heads: tuple[int, int]
    E: int
    lengths: tuple[int, ...]
    train: TrainConfig
    lr: float = 2e-3

    def job(self, seeds: tuple[int, ...]) -> Job:
        shape = Shape(d=TRIANGLE_D_IN, E=self.E, layers=2, heads=max(self.heads), head_dim=8, hidden=4 * self.E)
        tasks = tuple(TaskSpec("triangle", T) for T in self.lengths)
        members, tags = [], []
        for stream, seed in enumerate(seeds):
            for t in range(len(tasks)):
                members.append(Member(self.heads, (4 * self.E,) * 2, seed, t, stream, 0, self.lr))
                tags.append({"model": f"h={self.heads[0]},{self.heads[1]} E={self.E}"})
        return Job(NAME, f"{NAME}/h={self.heads[0]},{self.heads[1]},E={self.E}", shape, tuple(members),
                   tuple(tags), tasks, seeds, self.train)


FULL_TRAIN = TrainConfig(steps=20000, batch=128, eval_size=16384, log_every=500, checkpoints=4)
FULL = (Model((2, 2), 32, (4, 8, 16, 32), FULL_TRAIN), Model((4, 4), 64, (4, 8, 16, 32), FULL_TRAIN))
QUICK = (Model((2, 2), 32, (4, 8), TrainConfig(steps=600, batch=64, eval_size=2048, log_every=200, checkpoints=2),
               lr=3e-3),)
QUICK_SCOPE = ("one seed, one model, T = 4 and 8, 600 steps: shows the NMSE rising with T on this model, "
               "not whether it approaches 1 (that needs T = 32 and full training) nor the spread over seeds")
FULL_SCOPE = ("two models, T = 4..32, three seeds, one training budget; a rise with T alone would hold for "
              "any harder task, so read it beside the depth experiment's flat two-layer curve")


def jobs(quick: bool, seed: int) -> list[Job]:
    seeds = (seed,) if quick else (seed, seed + 1, seed + 2)
    return [m.job(seeds) for m in (QUICK if quick else FULL)]


def summarise(records: list[dict], quick: bool, device: str) -> Result:
    from tfcert.experiments.prediction import exponent, predicted

    records = [r for r in records if r["experiment"] == NAME]
    key = lambda r: (r["model"], r["T"])  # noqa: E731
    groups = {k: list(rs) for k, rs in groupby(sorted(records, key=key), key=key)}
    cells = {k: Spread.of(r["nmse"] for r in rs) for k, rs in groups.items()}
    shapes = {r["model"]: (tuple(r["heads"]), r["shape"]["E"]) for r in records}
    rows, lines, series, verdicts = [], [], [], []
    for model in sorted({k[0] for k in cells}):
        lengths = sorted(T for m, T in cells if m == model)
        heads, E = shapes[model]
        judged = [Cell.of(f"T={T}", exponent(TARGET, T, TRIANGLE_D_IN, E, heads), groups[model, T]) for T in lengths]
        checks = pairs(judged)
        for T, cell in zip(lengths, judged):
            p = predicted(TARGET, T, TRIANGLE_D_IN, E, heads)
            rows.append({"model": model, "T": T, "nmse": cells[model, T].to_json(), "prediction": p,
                         "fall": cell.fall()})
            lines.append((model, str(T), cells[model, T].text(), str(cell.exponent), f"{cell.fall():.2f}", p["text"]))
        rows.append({"model": model, "verdict": judge(checks, judged), "checks": [c.to_json() for c in checks]})
        verdicts.append(f"{model}: {summary(checks, judged)}")
        series.append(Series(model, tuple((T, cells[model, T]) for T in lengths)))
    table = Table(f"{steps_text(records)} steps; triangle centre: held-out NMSE "
                  "(geometric mean over seeds, least–greatest); fall: its drop over the last checkpoint interval",
                  ("model", "T", "NMSE", "InfoFlow e", "fall", "InfoFlow prediction"), tuple(lines))
    return Result(NAME, quick, device, CLAIM, CRITERION, QUICK_SCOPE if quick else FULL_SCOPE,
                  "; ".join(verdicts), (table,), tuple(rows), "T", tuple(series), tuple(records))
