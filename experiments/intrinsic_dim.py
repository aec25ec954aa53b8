"""Intrinsic-dimension experiment: heads per layer against the number D of pairwise comparisons.

InfoFlow: the target's D comparisons each need their own anchoring head in layer 1 and their own
resolving head in layer 2, so (h1, h2) = (D, D) has a T-bounded cost and every pattern with one
head fewer — (D−1, D), (D−1, D−1), (D, D−1) — does not. The seed reports NMSE ≈ 1e-5 for (D, D)
against ≈ 1e-2 … 1e-3 with fewer heads, whatever T.

Variants (docs/experiments.md): ``bilinear`` (the MLP is a gated linear unit, which represents
the bilinear scores ⟨x_t, M_k x_s⟩ exactly) is the main grid; ``relu`` is the project's first
architecture (a ReLU MLP, which can only approximate a product); the ablations vary one
optimisation or architecture knob at a time at D = 4, T = 16, where ``relu`` showed no
separation at all.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import groupby

from tfcert.experiments.report import Result, Series, Spread, Table, steps_text
from tfcert.experiments.spec import INTRINSIC_D_IN, Job, Member, Shape, TaskSpec, TrainConfig
from tfcert.experiments.verdict import AGREES, Cell, judge, pairs, summary
from tfcert.experiments.verdict import CRITERION as VERDICT_RULE

NAME = "intrinsic-dim"
PATTERNS = ("D,D", "D-1,D", "D-1,D-1", "D,D-1")
SEED = "seed 004: (D,D) ≈ 1e-5; one head fewer ≈ 1e-2 … 1e-3, whatever T"
CLAIM = ("(h1, h2) = (D, D) is the least head count with a T-bounded cost; with one head fewer in "
         "either layer every derivation decodes the whole sequence (exponent grows with T)")
CRITERION = ("per D, the patterns at each T and each pattern across T: " + VERDICT_RULE
             + ". The paper's 1e-5 is compared, not required")


def heads(pattern: str, D: int) -> tuple[int, int]:
    return tuple(D - (p == "D-1") for p in pattern.split(","))


@dataclass(frozen=True)
class Variant:
    """One trained configuration over a grid of D, T and head patterns."""

    name: str
    shape: Shape
    dims: tuple[int, ...]
    lengths: tuple[int, ...]
    patterns: tuple[str, ...]
    train: TrainConfig
    lrs: tuple[float, ...] = (2e-3,)
    scales: tuple[float, ...] = (1.0,)
    dtype: str = "float32"
    ablation: bool = False

    def jobs(self, seeds: tuple[int, ...]) -> list[Job]:
        """One job: every D, T, pattern and seed (a seed fixes the initialisation and the data)."""
        tasks = tuple(TaskSpec("intrinsic", T, max(self.dims), scale=s) for s in self.scales for T in self.lengths)
        members, tags = [], []
        for stream, seed in enumerate(seeds):
            for t, task in enumerate(tasks):
                for lr in self.lrs:
                    for D in self.dims:
                        for p in self.patterns:
                            members.append(Member(heads(p, D), (self.shape.hidden,) * 2, seed, t, stream, D - 1, lr))
                            tags.append({"variant": self.label(lr, task.scale), "D": D, "pattern": p,
                                         "ablation": self.ablation})
        job_name = f"{NAME}/{'ablation: ' if self.ablation else ''}{self.name}"
        return [Job(NAME, job_name, self.shape, tuple(members), tuple(tags), tasks, seeds,
                    self.train, self.dtype)]

    def label(self, lr: float, scale: float) -> str:
        extra = ([f"lr {lr:g}"] if len(self.lrs) > 1 else []) + ([f"x scale {scale:g}"] if len(self.scales) > 1 else [])
        return ", ".join([self.name, *extra])


def _shape(mlp: str, E: int = 64, hidden: int | None = None, head_dim: int = 8, heads: int = 6,
           init_scale: float = 1.0) -> Shape:
    """ReLU MLPs are 4E wide (the project's first architecture); bilinear ones 2E, which gives
    them fewer parameters than the ReLU models they are compared with."""
    default = 4 * E if mlp == "relu" else 2 * E
    return Shape(d=INTRINSIC_D_IN, E=E, layers=2, heads=heads, head_dim=head_dim,
                 hidden=default if hidden is None else hidden, mlp=mlp, init_scale=init_scale)


FULL_TRAIN = TrainConfig(steps=20000, batch=128, eval_size=16384, log_every=500, checkpoints=4)
_ABL = dict(dims=(4,), lengths=(16,), patterns=("D,D", "D-1,D"), train=FULL_TRAIN, ablation=True)
FULL = (
    Variant("bilinear", _shape("bilinear"), (2, 3, 4, 5, 6), (8, 16, 32), PATTERNS, FULL_TRAIN),
    Variant("relu", _shape("relu"), (2, 3, 4, 5, 6), (8, 16, 32), ("D,D", "D-1,D"), FULL_TRAIN),
    Variant("relu", _shape("relu", heads=4), lrs=(1e-3, 2e-3, 5e-3), scales=(1.0, 2.0), **_ABL),
    Variant("relu, MLP width 1024", _shape("relu", hidden=1024, heads=4), **_ABL),
    Variant("relu, head dim 16", _shape("relu", head_dim=16, heads=4), **_ABL),
    Variant("relu, float64", _shape("relu", heads=4), dtype="float64", **_ABL),
    Variant("relu, initial weights x0.5", _shape("relu", heads=4, init_scale=0.5), **_ABL),
    Variant("bilinear", _shape("bilinear", heads=4), lrs=(1e-3, 2e-3, 5e-3), scales=(1.0, 2.0), **_ABL),
    Variant("bilinear, float64", _shape("bilinear", heads=4), dtype="float64", **_ABL),
    Variant("bilinear, 5000 steps", _shape("bilinear", heads=4), **{**_ABL, "train": replace(FULL_TRAIN, steps=5000)}),
    Variant("bilinear, batch 512", _shape("bilinear", heads=4), **{**_ABL, "train": replace(FULL_TRAIN, batch=512)}),
)
# The grids, chosen from the calculus: one head fewer leaves only decoding the whole sequence,
# exponent T·d/E − 1, which is > 0 only where T·d > E, while (D, D) has exponent 0. So E < d·T at
# every T of a grid (at d = 4, E = 64, T <= 16 every pattern has exponent 0 and nothing separates),
# and E >= d + d·D, room for a token and the D tokens its layer-1 heads retrieve; head dimension
# 8 >= d, so one head can carry one token. CPU: E = 24, T = 8 and 16 (one head fewer: 1/3 and 5/3),
# one job per T and seed (a resumed run loses at most one job). GPU: E = 32, T = 16 and 32 (1 and 3),
# D up to 6, one bank.
CPU_TRAIN = TrainConfig(steps=36000, batch=128, eval_size=8192, log_every=250, checkpoints=4)
CPU_GRID = tuple(Variant("bilinear, E=24", _shape("bilinear", E=24, heads=3), (2, 3), (T,), PATTERNS[:3],
                         CPU_TRAIN, lrs=(5e-3,)) for T in (8, 16))
GPU_GRID = (Variant("bilinear, E=32", _shape("bilinear", E=32), (2, 3, 4, 5, 6), (16, 32), PATTERNS, FULL_TRAIN,
                    lrs=(5e-3,)),)
GRIDS = ("cpu", "gpu")


def grid_jobs(name: str, seed: int = 0) -> list[Job]:
    """The jobs of grid ``name`` (``GRIDS``) over seeds S, S+1, S+2: on CPU one per T and seed,
    on a GPU the whole grid as one bank."""
    seeds = (seed, seed + 1, seed + 2)
    if name == "gpu":
        return GPU_GRID[0].jobs(seeds)
    return [replace(job, name=f"{job.name}, T={v.lengths[0]}, seed {s}")
            for s in seeds for v in CPU_GRID for job in v.jobs((s,))]


QUICK = (Variant("bilinear", _shape("bilinear", E=32, heads=2), (2,), (8,), ("D,D", "D-1,D"),
                 TrainConfig(steps=2000, batch=128, eval_size=4096, log_every=250, checkpoints=2), lrs=(5e-3,)),)
QUICK_SCOPE = ("one seed, D = 2, T = 8, 2000 steps of a small model: enough to see (D,D) pull ahead of "
               "(D-1,D) on this one configuration, not to test the size of the gap, the seed's 1e-5, "
               "other D, T-independence or the spread over seeds; the full grid does (docs/results/)")
FULL_SCOPE = ("three seeds per configuration over the D, T and head patterns the tables list (and one-knob "
              "ablations, if the records hold them); a finite training budget, so a cell still falling at "
              "the end makes every check it enters inconclusive, and an exponent says which pattern should "
              "be worse, not by how much")


def jobs(quick: bool, seed: int) -> list[Job]:
    seeds = (seed,) if quick else (seed, seed + 1, seed + 2)
    return [j for v in (QUICK if quick else FULL) for j in v.jobs(seeds)]


def _predictions(D: int, T: int, E: int) -> dict[str, dict]:
    from tfcert.experiments.prediction import least_heads, predicted

    target = f"{NAME}:D={D}"
    fewest = least_heads(target, T, INTRINSIC_D_IN, E)
    out = {p: predicted(target, T, INTRINSIC_D_IN, E, heads(p, D)) for p in PATTERNS}
    for p in out.values():
        p["min_heads"] = None if fewest is None else list(fewest)
    return out


def summarise(records: list[dict], quick: bool, device: str) -> Result:
    from tfcert.experiments.prediction import exponent

    records = [r for r in records if r["experiment"] == NAME]
    groups = {k: list(rs) for k, rs in groupby(sorted(records, key=_key), key=_key)}
    E_of = {k[0]: rs[0]["shape"]["E"] for k, rs in groups.items()}
    cells = {k: Cell.of(f"({k[3]}) T={k[2]}", exponent(f"{NAME}:D={k[1]}", k[2], INTRINSIC_D_IN, E_of[k[0]],
                                                          heads(k[3], k[1])), rs) for k, rs in groups.items()}
    spreads = {k: Spread.of(c.nmse) for k, c in cells.items()}
    variants = list(dict.fromkeys(k[0] for k in cells))
    steps = {v: steps_text(r for r in records if r["variant"] == v) for v in variants}
    grid_variants = [v for v in variants if not any(r["ablation"] for r in records if r["variant"] == v)]
    rows, tables, series, verdicts = [], [], [], []
    for v in grid_variants:
        dims = sorted({k[1] for k in cells if k[0] == v})
        lengths = sorted({k[2] for k in cells if k[0] == v})
        patterns = [p for p in PATTERNS if any(k[0] == v and k[3] == p for k in cells)]
        lines = []
        for D in dims:
            here = {(T, p): cells[v, D, T, p] for T in lengths for p in patterns if (v, D, T, p) in cells}
            checks = [c for T in lengths for c in pairs([here[T, p] for p in patterns if (T, p) in here])]
            checks += [c for p in patterns for c in pairs([here[T, p] for T in lengths if (T, p) in here])]
            verdict = judge(checks, list(here.values()))
            for i, T in enumerate(lengths):
                at = {p: here[T, p] for p in patterns if (T, p) in here}
                fewer = [p for p in at if p != "D,D"]
                ratio = min(at[p].mean for p in fewer) / at["D,D"].mean if fewer and "D,D" in at else None
                last = i == len(lengths) - 1
                rows.append({"variant": v, "D": D, "T": T, "steps": steps[v], "E": E_of[v],
                             "nmse": {p: spreads[v, D, T, p].to_json() for p in at},
                             "exponent": {p: str(c.exponent) for p, c in at.items()},
                             "fall": {p: c.fall() for p, c in at.items()}, "ratio": ratio,
                             "prediction": {p: q for p, q in _predictions(D, T, E_of[v]).items() if p in at}})
                lines.append((str(D), str(T), *(spreads[v, D, T, p].text() if p in at else "-" for p in patterns),
                              " / ".join(str(at[p].exponent) if p in at else "-" for p in patterns),
                              "-" if ratio is None else f"{ratio:.1f}",
                              " / ".join(f"{at[p].fall():.2f}" if p in at else "-" for p in patterns),
                              verdict if last else ""))
            rows.append({"variant": v, "D": D, "verdict": verdict, "checks": [c.to_json() for c in checks]})
            verdicts.append(f"{v}, D={D}: {summary(checks, list(here.values()))}")
        tables.append(Table(f"{v}, {steps[v]} steps: held-out NMSE, geometric mean over seeds "
                            f"(least–greatest); InfoFlow e and fall (the drop over the last checkpoint "
                            f"interval) per pattern in column order; {SEED}",
                            ("D", "T", *(f"({p})" for p in patterns), "InfoFlow e", "fewer/(D,D)", "fall",
                             "verdict (per D)"), tuple(lines)))
        for p in patterns if v == grid_variants[0] else ():  # plot the main variant
            for T in lengths:
                series.append(Series(f"({p}) T={T}",
                                     tuple((D, spreads[v, D, T, p]) for D in dims if (v, D, T, p) in cells)))
    ablations = [v for v in variants if v not in grid_variants]
    if ablations:
        lines = []
        for v in ablations:
            (D, T), = {(k[1], k[2]) for k in cells if k[0] == v}
            dd, fewer = cells[v, D, T, "D,D"], cells[v, D, T, "D-1,D"]
            checks = pairs([dd, fewer])
            verdict = judge(checks, [dd, fewer])
            rows.append({"variant": v, "D": D, "T": T, "ablation": True, "steps": steps[v], "E": E_of[v],
                         "nmse": {"D,D": spreads[v, D, T, "D,D"].to_json(),
                                  "D-1,D": spreads[v, D, T, "D-1,D"].to_json()},
                         "exponent": {"D,D": str(dd.exponent), "D-1,D": str(fewer.exponent)},
                         "ratio": fewer.mean / dd.mean, "verdict": verdict, "checks": [c.to_json() for c in checks]})
            lines.append((v, steps[v], str(D), str(T), spreads[v, D, T, "D,D"].text(),
                          spreads[v, D, T, "D-1,D"].text(), f"{dd.exponent} / {fewer.exponent}",
                          f"{fewer.mean / dd.mean:.1f}", f"{dd.fall():.2f} / {fewer.fall():.2f}", verdict))
        tables.append(Table("ablations: one knob at a time (geometric mean over seeds, least–greatest)",
                            ("variant", "steps", "D", "T", "(D,D)", "(D-1,D)", "InfoFlow e", "(D-1,D)/(D,D)",
                             "fall", "verdict"), tuple(lines)))
        verdicts.append(f"ablations: {sum(r['verdict'] == AGREES for r in rows if r.get('ablation'))} of "
                        f"{len(ablations)} agree")
    return Result(NAME, quick, device, CLAIM, CRITERION, QUICK_SCOPE if quick else FULL_SCOPE,
                  "; ".join(verdicts), tuple(tables), tuple(rows), "D",
                  tuple(s for s in series if s.points), tuple(records))


def _key(r: dict) -> tuple[str, int, int, str]:
    return (r["variant"], r["D"], r["T"], r["pattern"])
