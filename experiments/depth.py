"""Depth separation, trained: one layer against two at equal parameter count on pairwise-min.

InfoFlow (Theorem 1): on min_{t≠s} ⟨x_t, x_s⟩ a one-layer transformer must decode the whole
sequence from the readout's stream (exponent T·d/E − 1, growing with T), while two layers with
one head each anchor every token's best partner and then resolve the minimum (exponent
max(0, 2d/E − 1), bounded in T). So at a fixed parameter count the one-layer NMSE should grow
with T once T·d > E, and the two-layer NMSE should not.

The one-layer model gets a wider MLP so that both have the same number of parameters (within
a fraction of a percent; both counts are reported).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from tfcert.experiments.report import Result, Series, Spread, Table, steps_text
from tfcert.experiments.spec import Job, Member, Shape, TaskSpec, TrainConfig
from tfcert.experiments.verdict import CRITERION as VERDICT_RULE
from tfcert.experiments.verdict import Cell, judge, pairs, summary

NAME = "depth"
D_IN = 2
CLAIM = ("at equal parameter count, one layer's exponent T*d/E - 1 (clamped at 0) grows with T and two layers' "
         "max(0, 2d/E - 1) does not: the one-layer NMSE should rise with T past T*d = E and exceed the "
         "two-layer one there, the two-layer NMSE should stay level")
CRITERION = "per model size, one layer against two at each T and each depth across T: " + VERDICT_RULE


@dataclass(frozen=True)
class Grid:
    E: int
    lengths: tuple[int, ...]
    sizes: tuple[int, ...]  # MLP width of each layer of the two-layer model
    train: TrainConfig
    lr: float = 3e-3

    def shape(self) -> Shape:
        return Shape(d=D_IN, E=self.E, layers=2, heads=1, head_dim=8, hidden=max(self.matched(w) for w in self.sizes))

    def matched(self, width: int) -> int:
        """The one-layer MLP width whose parameter count is closest to the two-layer model's."""
        shape = Shape(d=D_IN, E=self.E, layers=2, heads=1, head_dim=8, hidden=10 ** 6)
        target = Member((1, 1), (width, width)).parameters(shape)
        return min(range(1, 8 * width + 64), key=lambda f: abs(Member((1,), (f,)).parameters(shape) - target))

    def job(self, seeds: tuple[int, ...]) -> Job:
        tasks = tuple(TaskSpec("pairwise", T, d=D_IN) for T in self.lengths)
        members, tags = [], []
        for stream, seed in enumerate(seeds):
            for t, T in enumerate(self.lengths):
                for w in self.sizes:
                    members.append(Member((1, 1), (w, w), seed, t, stream, 0, self.lr))
                    tags.append({"size": w, "E": self.E})
                    members.append(Member((1,), (self.matched(w),), seed, t, stream, 0, self.lr))
                    tags.append({"size": w, "E": self.E})
        return Job(NAME, f"{NAME}/E={self.E}", self.shape(), tuple(members), tuple(tags), tasks, seeds, self.train)


FULL = (Grid(16, (4, 8, 16, 32), (16, 64),
             TrainConfig(steps=20000, batch=128, eval_size=16384, log_every=500, checkpoints=4)),)
QUICK = (Grid(4, (4, 16), (16,), TrainConfig(steps=1000, batch=64, eval_size=4096, log_every=250, checkpoints=2),
              lr=1e-2),)
QUICK_SCOPE = ("one seed, E = 4, T = 4 and 16, one model size, 1000 steps: shows whether the one-layer "
               "model falls behind the two-layer one as T grows on this small case; not the spread over "
               "seeds, other sizes or T = 32")
FULL_SCOPE = ("E = 16, T = 4..32, two model sizes, three seeds, one training budget; equal parameter "
              "count, not equal compute or equal ease of optimisation")


def jobs(quick: bool, seed: int) -> list[Job]:
    seeds = (seed,) if quick else (seed, seed + 1, seed + 2)
    return [g.job(seeds) for g in (QUICK if quick else FULL)]


def summarise(records: list[dict], quick: bool, device: str) -> Result:
    from tfcert.experiments.prediction import exponent

    records = [r for r in records if r["experiment"] == NAME]
    key = lambda r: (r["E"], r["size"], r["T"], r["layers"])  # noqa: E731
    groups = {k: list(rs) for k, rs in groupby(sorted(records, key=key), key=key)}
    cells = {k: Cell.of(f"{k[3]} layer{'s' if k[3] > 1 else ''}, T={k[2]}",
                        exponent("pairwise-min", k[2], D_IN, k[0], (1,) * k[3]), rs) for k, rs in groups.items()}
    spreads = {k: Spread.of(c.nmse) for k, c in cells.items()}
    rows, lines, series, verdicts = [], [], [], []
    for E, size in sorted({(k[0], k[1]) for k in cells}):
        lengths = sorted({k[2] for k in cells if k[:2] == (E, size)})
        judged = [cells[E, size, T, n] for T in lengths for n in (1, 2)]
        checks = [c for T in lengths for c in pairs([cells[E, size, T, 1], cells[E, size, T, 2]])]
        checks += [c for n in (1, 2) for c in pairs([cells[E, size, T, n] for T in lengths])]
        for T in lengths:
            one, two = (cells[E, size, T, n] for n in (1, 2))
            params = {str(n): groups[E, size, T, n][0]["parameters"] for n in (1, 2)}
            rows.append({"E": E, "size": size, "T": T, "parameters": params,
                         "nmse": {"1": spreads[E, size, T, 1].to_json(), "2": spreads[E, size, T, 2].to_json()},
                         "exponent": {"1": str(one.exponent), "2": str(two.exponent)},
                         "fall": {"1": one.fall(), "2": two.fall()}, "ratio": one.mean / two.mean})
            lines.append((f"{size}", str(T), f"{params['1']} / {params['2']}", spreads[E, size, T, 1].text(),
                          spreads[E, size, T, 2].text(), f"{one.mean / two.mean:.1f}",
                          f"{one.exponent} / {two.exponent}", f"{one.fall():.2f} / {two.fall():.2f}"))
        rows.append({"E": E, "size": size, "verdict": judge(checks, judged), "checks": [c.to_json() for c in checks]})
        verdicts.append(f"size {size} (E={E}): {summary(checks, judged)}")
        for layers in (1, 2):
            series.append(Series(f"{layers} layer{'s' if layers > 1 else ''}, size {size}, E={E}",
                                 tuple((T, spreads[E, size, T, layers]) for T in lengths)))
    table = Table(f"{steps_text(records)} steps; pairwise-min, one layer vs two at equal parameter count "
                  "(geometric mean over seeds, least–greatest); fall: the drop over the last checkpoint interval",
                  ("two-layer MLP width", "T", "parameters 1L / 2L", "NMSE 1 layer", "NMSE 2 layers",
                   "1L/2L", "InfoFlow e 1L / 2L", "fall 1L / 2L"), tuple(lines))
    return Result(NAME, quick, device, CLAIM, CRITERION, QUICK_SCOPE if quick else FULL_SCOPE,
                  "; ".join(verdicts), (table,), tuple(rows), "T", tuple(series), tuple(records))
