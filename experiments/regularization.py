"""Regularization diagnostic: train the construction's architecture on a dataset with
objective = set loss + ε‖θ‖², and compare every run with the bound an exact interpolant gives.

The exact-interpolation paper (Alcalde, Fantuzzi, Zuazua, arXiv 2502.02270, §3.4): an exact
interpolant θ_c has set loss 0, so the global minimum of the objective is at most ε‖θ_c‖², and
it falls linearly with ε as ε → 0. A trained run whose objective lies above that bound has
missed the global minimum; one whose objective does not fall with ε is stuck away from it.

* θ_c is the model ``construct`` builds for the dataset with softmax attention; the trained
  architecture is the same (blocks, FF widths, attention ranks, temperature fixed at τ*), and
  every number the model format stores is trained: η, U, b, W, ρ and A, V as scale·I + Σ u vᵀ.
* ‖θ_c‖² is exact: the sum of the squares of the model file's rationals.
* The runs are float64 and θ_c's own float set loss is not 0. A run is flagged only when its
  computed objective exceeds ``threshold(ε)``, an exact upper bound on the computed objective of
  θ_c rounded to float64: the certificate's float claim bounds θ_c's outputs, and the rounding of
  the loss and of the norm is bounded with Higham's γ_k (``set_slack``, ``threshold``). The trained
  weights' own rounding error is not certified; the flag compares float64 objectives.

Importing this module imports torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import torch

from tfcert.experiments.cost_law import fit_slope
from tfcert.experiments.report import Result, Series, Spread, Table
from tfcert.experiments.spec import TrainConfig
from tfcert.experiments.train import Log, optimise
from tfcert.export.rounding import as_fraction, round_to

NAME = "regularization"
PAPER = "the exact-interpolation paper (Alcalde, Fantuzzi, Zuazua, arXiv 2502.02270)"
CLAIM = ("an exact interpolant theta_c has set loss 0, so the global minimum of set loss + eps*|theta|^2 is "
         "at most eps*|theta_c|^2 and falls linearly in eps as eps -> 0 (§3.4); a run above that bound, or "
         "one whose objective does not fall with eps, has missed the global minimum")
CRITERION = ("a run is flagged (its objective is provably above the global minimum's bound) when its float64 "
             "objective exceeds eps*|theta_c|^2 plus the most that float64 rounding can add to theta_c's own "
             "computed objective (the certificate's float64 bound on theta_c's outputs, and the rounding of the "
             "loss and the norm); global minima give a log-log slope <= 1 that tends to 1 as eps -> 0")
UNIT = Fraction(1, 2 ** 53)  # unit roundoff of binary64
TINY = Fraction(1, 2 ** 1074)  # the smallest subnormal: a bound on what one underflow can lose


# ---------------------------------------------------------------- parameters

@dataclass(frozen=True)
class Slot:
    """One stored tensor of a block: where its numbers sit in the flat parameter vector."""

    name: str
    offset: int
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _block_tensors(block, d: int) -> list[tuple[str, tuple[int, ...], list]]:
    """A block's stored numbers, tensor by tensor, in the order of the model format."""
    ff, sa = block.ff, block.sa
    width = len(ff.U)
    out = [("eta", (), [ff.eta]), ("U", (width, d), [x for r in ff.U for x in r]),
           ("b", (width,), list(ff.b)), ("W", (d, width), [x for r in ff.W for x in r]),
           ("rho", (), [sa.rho])]
    for key, m in (("A", sa.A), ("V", sa.V)):
        rank = len(m.terms)
        out += [(f"{key}_scale", (), [m.scale]), (f"{key}_u", (rank, d), [x for u, _ in m.terms for x in u]),
                (f"{key}_v", (rank, d), [x for _, v in m.terms for x in v])]
    return out


def layout(model) -> tuple[tuple[Slot, ...], ...]:
    """Per block, its tensors' slots in the flat vector (the same order as ``exact_parameters``)."""
    blocks, offset = [], 0
    for block in model.blocks:
        slots = []
        for name, shape, _ in _block_tensors(block, model.d):
            slots.append(Slot(name, offset, shape))
            offset += slots[-1].size
        blocks.append(tuple(slots))
    return tuple(blocks)


def exact_parameters(model) -> list[Fraction]:
    """θ_c: every stored number of the model, exactly, in layout order."""
    return [as_fraction(x) for block in model.blocks for _, _, xs in _block_tensors(block, model.d) for x in xs]


def squared_norm(values) -> Fraction:
    """Σ x², exactly."""
    return sum((x * x for x in map(as_fraction, values)), Fraction(0))


def random_start(slots: tuple[tuple[Slot, ...], ...], size: int, d: int, seed: int) -> torch.Tensor:
    """A random point of the same architecture: η = ρ = 1 (identity residual paths), W ~ N(0, 1/width),
    every other number ~ N(0, 1/d)."""
    g = torch.Generator().manual_seed(seed)
    flat = torch.randn(size, generator=g, dtype=torch.float64) / math.sqrt(d)
    for block in slots:
        for s in block:
            if s.name in ("eta", "rho"):
                flat[s.offset] = 1.0
            elif s.name == "W" and s.size:
                flat[s.offset:s.offset + s.size] *= math.sqrt(d / s.shape[1])
    return flat


# ---------------------------------------------------------------- the network and the loss

def _take(flat: torch.Tensor, s: Slot) -> torch.Tensor:
    """Slot ``s`` of every member, (M, *shape); scalars as (M, 1, 1, 1) to broadcast over tokens."""
    t = flat[:, s.offset:s.offset + s.size]
    return t.reshape(len(flat), 1, 1, 1) if s.shape == () else t.reshape(len(flat), *s.shape)


def _low_rank(scale, u, v, x):
    """(scale·I + Σ_k u_k v_kᵀ) on every token of x (M, S, n, d), in the stored low-rank form."""
    return scale * x + torch.einsum("msnr,mrd->msnd", torch.einsum("msnd,mrd->msnr", x, v), u)


def forward(flat: torch.Tensor, slots, x: torch.Tensor, mask: torch.Tensor, tau: float) -> torch.Tensor:
    """The model format's network for every member: flat (M, P), x (S, n, d) padded, mask (S, n)
    True at tokens → (M, S, n, d), padding 0. Block = SA ∘ FF, softmax attention at temperature τ,
    scores ⟨A x_i, x_l⟩ over the sequence's own tokens (as tfcert.export's module computes it)."""
    tokens, keys = mask[None, :, :, None], mask[None, :, None, :]
    zero = torch.zeros((), dtype=x.dtype)
    x = x.expand(flat.shape[0], *x.shape)
    for block in slots:
        p = {s.name: _take(flat, s) for s in block}
        hidden = torch.relu(torch.einsum("msnd,mwd->msnw", x, p["U"]) + p["b"][:, None, None, :])
        x = torch.where(tokens, p["eta"] * x + torch.einsum("msnw,mdw->msnd", hidden, p["W"]), zero)
        scores = torch.einsum("msnd,msld->msnl", _low_rank(p["A_scale"], p["A_u"], p["A_v"], x), x)
        weights = torch.softmax((scores / tau).masked_fill(~keys, -math.inf), dim=-1)
        mixed = torch.einsum("msnl,msld->msnd", weights, x)
        x = torch.where(tokens, p["rho"] * x + _low_rank(p["V_scale"], p["V_u"], p["V_v"], mixed), zero)
    return x


def set_loss(out: torch.Tensor, mask: torch.Tensor, y: torch.Tensor, ymask: torch.Tensor) -> torch.Tensor:
    """Σ_j [mean over targets of the least squared distance to an output + mean over outputs of the
    least squared distance to a target], per member: 0 exactly when each output set equals its
    target set. out (M, S, n, d), y (S, m, d)."""
    dist = (out[:, :, :, None, :] - y[None, :, None, :, :]).square().sum(-1)  # (M, S, n, m)
    to_output = dist.masked_fill(~mask[None, :, :, None], math.inf).amin(2)  # (M, S, m)
    to_target = dist.masked_fill(~ymask[None, :, None, :], math.inf).amin(3)  # (M, S, n)
    zero = torch.zeros((), dtype=out.dtype)
    per_target = torch.where(ymask, to_output, zero).sum(-1) / ymask.sum(-1)
    per_output = torch.where(mask, to_target, zero).sum(-1) / mask.sum(-1)
    return (per_target + per_output).sum(-1)


# ---------------------------------------------------------------- the problem

@dataclass(frozen=True)
class Problem:
    """A dataset and its certified interpolant θ_c, ready to train on."""

    dataset: str
    d: int
    tau: Fraction
    slots: tuple[tuple[Slot, ...], ...]
    theta: list[Fraction]  # θ_c, exact
    norm2: Fraction  # ‖θ_c‖², exact
    float_bound: Fraction | None  # the certificate's binary64 bound on θ_c's outputs, if it has one
    x: torch.Tensor  # (S, n, d) inputs rounded to float64, padded
    mask: torch.Tensor
    y: torch.Tensor  # (S, m, d) targets rounded to float64, padded
    ymask: torch.Tensor
    y_max: Fraction  # max |target coordinate|

    @property
    def size(self) -> int:
        return len(self.theta)

    def theta_float(self) -> torch.Tensor:
        """θ_c rounded once to float64 (nearest, ties to even), as tfcert.export rounds it."""
        return torch.tensor([round_to(v) for v in self.theta], dtype=torch.float64)


def _padded(seqs, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(s) for s in seqs)
    x = torch.zeros(len(seqs), n, d, dtype=torch.float64)
    mask = torch.zeros(len(seqs), n, dtype=torch.bool)
    for j, s in enumerate(seqs):
        x[j, :len(s)] = torch.tensor([[round_to(v) for v in t] for t in s], dtype=torch.float64)
        mask[j, :len(s)] = True
    return x, mask


def prepare(dataset) -> Problem:
    """Build θ_c for ``dataset`` (a dataset.json path) with softmax attention; bad input is an
    InputError naming the file."""
    from tfcert.construct.bundle import build
    from tfcert.errors import InputError, with_limit_hint
    from tfcert.export import certified_bound
    from tfcert.files import load
    from tfcert.progress import Bar
    from tfcert.verify.formats import parse_document, read_dataset, read_model

    try:
        with Bar("construct") as bar:
            files = build(load(dataset, "dataset"), "softmax", progress=bar).files
    except InputError as exc:  # `tfcert experiment` takes no --limit: the hint names the library's limits
        raise InputError(with_limit_hint(str(exc), library=True)) from None
    model = read_model(parse_document("model.json", files["model.json"]))
    data = read_dataset(parse_document("dataset.json", files["dataset.json"]))
    theta = exact_parameters(model)
    x, mask = _padded([p.input for p in data.pairs], model.d)
    y, ymask = _padded([p.output for p in data.pairs], model.d)
    y_max = max(abs(as_fraction(v)) for p in data.pairs for t in p.output for v in t)
    return Problem(str(dataset), model.d, as_fraction(model.temperature), layout(model), theta, squared_norm(theta),
                   certified_bound(files["certificate.json"], "float64"), x, mask, y, ymask, y_max)


def gamma(k: int) -> Fraction:
    """Higham's γ_k = k·u / (1 − k·u): the relative error of a float64 sum or product of k terms."""
    return k * UNIT / (1 - k * UNIT)


def set_slack(problem: Problem, measured: float) -> tuple[Fraction, str]:
    """An upper bound on θ_c's computed float64 set loss, and where it comes from. With the certificate's
    bound B on every output coordinate, each output and its exact target differ by at most
    e = (B + u·max|y| + s)(1 + u) per coordinate after rounding the target and subtracting (s: the
    smallest subnormal, for underflow); a squared distance is then ≤ d·(e² + s) with its rounding, the
    means and the sum over the N sequences keep 2·N·d·(e² + s), and the (1 + γ) factors of those float
    sums are < 2. Without a float claim only the measured value is left (not certified)."""
    if problem.float_bound is None:
        return Fraction(measured), "measured (the certificate has no float64 claim)"
    e = (problem.float_bound + UNIT * problem.y_max + TINY) * (1 + UNIT)
    return 4 * len(problem.x) * problem.d * (e * e + TINY), "certified"


def threshold(eps: float, norm2_float: Fraction, size: int, slack: Fraction) -> Fraction:
    """The most θ_c's computed objective fl(set loss + fl(ε·fl(Σ θ̂²))) can be: ‖θ̂‖² (θ_c rounded,
    exact) summed in any order errs by ≤ γ_P (plus one smallest subnormal per underflowing square),
    times ε and the final addition add one rounding each."""
    reg = Fraction(eps) * (norm2_float * (1 + gamma(size)) + size * TINY) * (1 + UNIT)
    return (reg + slack) * (1 + UNIT)


# ---------------------------------------------------------------- the runs

@dataclass(frozen=True)
class Plan:
    """The sweep: ε = 10^k for each exponent (from 10^-1 down to two decades below 1/‖θ_c‖², where the
    bound ε‖θ_c‖² first says something about set losses below 1), the starts, the training."""

    count: int  # how many exponents, evenly spread over the range (0: every decade; 1: the lowest)
    seeds: int  # random starts
    train: TrainConfig
    rate: float  # Adam's rate from a random start
    # Adam's rates from θ_c. Its minimum is very sharp (numbers up to ~1e8 multiply hat windows ~1e-5
    # wide): on the demo dataset a rate of 1e-9 already leaves it within 200 steps, 1e-11 stays.
    rates_c: tuple[float, ...] = (1e-11, 1e-7)

    def exponents(self, norm2: Fraction) -> list[int]:
        low = math.floor(-math.log10(float(norm2))) - 1 if norm2 > 1 else -2
        if self.count == 0:
            return list(range(low, 0))
        return sorted({round(low + (-1 - low) * i / max(1, self.count - 1)) for i in range(self.count)})


QUICK = Plan(4, 1, TrainConfig(steps=1000, batch=0, eval_size=0, log_every=250, checkpoints=4), 3e-2)
FULL = Plan(0, 3, TrainConfig(steps=5000, batch=0, eval_size=0, log_every=500, checkpoints=5), 3e-2)
QUICK_SCOPE = ("theta_c at two Adam rates and one random start, four eps spread over the decades, 1000 steps, "
               "one dataset: shows which runs end above the certified bound (those provably missed the global "
               "minimum) and a coarse slope; it cannot show that an unflagged run is at the global minimum (the "
               "bound is one-sided), the asymptotic slope as eps -> 0 (that needs every decade and long "
               "training), or the spread over random starts")
FULL_SCOPE = ("theta_c at two Adam rates and three random starts, every decade of eps from two below "
              "1/|theta_c|^2 up to 0.1, 5000 Adam steps: a flag is a proof against the run (up to the trained "
              "weights' own float64 rounding); no flag proves nothing, and the slope is read from one "
              "training budget")


def objective_parts(problem: Problem, params: torch.Tensor,
                    epsilon: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(set loss, ε‖θ‖²) of every member: params (M, P), epsilon (M,)."""
    out = forward(params, problem.slots, problem.x, problem.mask, round_to(problem.tau))
    return set_loss(out, problem.mask, problem.y, problem.ymask), epsilon * params.square().sum(1)


def starts(problem: Problem, plan: Plan, seed: int) -> list[tuple[str, torch.Tensor, float]]:
    """(label, starting point, Adam's rate): θ_c rounded to float64 at each of the plan's rates, then the
    random starts of seeds seed, seed + 1, …"""
    out = [(f"theta_c, lr {rate:g}", problem.theta_float(), rate) for rate in plan.rates_c]
    return out + [(f"seed {s}", random_start(problem.slots, problem.size, problem.d, s), plan.rate)
                  for s in range(seed, seed + plan.seeds)]


def run(problem: Problem, plan: Plan, seed: int, log: Log) -> list[dict]:
    """Train every (start, ε) member as one batch; one record per member."""
    eps = [10.0 ** k for k in plan.exponents(problem.norm2)]
    members = [(name, theta, e, rate) for name, theta, rate in starts(problem, plan, seed) for e in eps]
    flat = torch.stack([theta for _, theta, _, _ in members])
    epsilon = torch.tensor([e for _, _, e, _ in members], dtype=torch.float64)

    def losses(_: int) -> torch.Tensor:
        loss, reg = objective_parts(problem, flat, epsilon)
        return loss + reg

    curve: list[tuple[int, list[float]]] = []

    def checkpoint(step: int, _: int) -> None:
        with torch.no_grad():
            curve.append((step, losses(step).tolist()))

    done = optimise(flat, torch.tensor([m[3] for m in members]), losses, plan.train, log, NAME,
                    checkpoint=checkpoint)
    with torch.no_grad():
        loss, reg = objective_parts(problem, flat, epsilon)
        objective = (loss + reg).tolist()
        theta_loss = float(objective_parts(problem, problem.theta_float()[None], epsilon[:1])[0][0])
    slack, source = set_slack(problem, theta_loss)
    norm2_float = squared_norm(problem.theta_float().tolist())
    theta_c = {"norm2": _text(problem.norm2), "set_loss_float64": theta_loss, "set_loss_slack": float(slack),
               "slack_source": source, "temperature": _text(problem.tau),
               "float_bound": None if problem.float_bound is None else _text(problem.float_bound)}
    records = []
    for i, (name, _, e, rate) in enumerate(members):
        limit = threshold(e, norm2_float, problem.size, slack)
        records.append({
            "experiment": NAME, "dataset": problem.dataset, "start": name, "epsilon": e,
            "objective": objective[i], "set_loss": float(loss[i]), "regularizer": float(reg[i]),
            "bound": float(Fraction(e) * problem.norm2), "threshold": float(limit),
            "flagged": not math.isfinite(objective[i]) or Fraction(objective[i]) > limit, "curve": [[s, v[i]] for s, v in curve],
            "steps": done.steps, "lr": rate, "parameters": problem.size, "train": plan.train.to_json(),
            "dtype": "float64", "theta_c": theta_c})
    return records


def _text(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


# ---------------------------------------------------------------- the report

def _slope(xs: list[float], ys: list[float]) -> float | None:
    """The fitted log-log slope; None with a single ε (JSON has no NaN)."""
    slope = fit_slope(xs, ys)
    return None if math.isnan(slope) else slope


def _show(slope: float | None) -> str:
    return "-" if slope is None else f"{slope:.2f}"


def summarise(records: list[dict], quick: bool, device: str) -> Result:
    """The table of runs, θ_c's numbers, the fitted slopes and the verdict."""
    c = records[0]["theta_c"]
    norm2 = Fraction(c["norm2"])
    labels = list(dict.fromkeys(r["start"] for r in records))
    runs, slopes, series, rows = [], [], [], []
    for start in labels:
        rs = sorted((r for r in records if r["start"] == start), key=lambda r: r["epsilon"])
        xs = [r["epsilon"] for r in rs]
        slope, loss_slope = (_slope(xs, [r[k] for r in rs]) for k in ("objective", "set_loss"))
        slopes.append((start, _show(slope), _show(loss_slope), str(sum(r["flagged"] for r in rs))))
        rows.append({"start": start, "slope_objective": slope, "slope_set_loss": loss_slope,
                     "flagged": sum(r["flagged"] for r in rs), "runs": len(rs)})
        for r in rs:
            runs.append((start, f"{r['epsilon']:.0e}", f"{r['objective']:.3e}", f"{r['set_loss']:.3e}",
                         f"{r['regularizer']:.3e}", f"{r['bound']:.3e}", "FLAGGED" if r["flagged"] else "-"))
            rows.append({k: r[k] for k in ("start", "epsilon", "objective", "set_loss", "regularizer", "bound",
                                           "threshold", "flagged")})
        series.append(Series(f"objective, {start}", tuple((x, Spread.of([r["objective"]])) for x, r in zip(xs, rs))))
        series.append(Series(f"set loss, {start}", tuple((x, Spread.of([r["set_loss"]])) for x, r in zip(xs, rs))))
    grid = sorted({r["epsilon"] for r in records})
    series.append(Series("bound eps*|theta_c|^2", tuple((e, Spread.of([float(e * norm2)])) for e in grid)))
    theta = Table(f"certified interpolant theta_c ({records[0]['dataset']}, softmax at tau* = {c['temperature']})",
                  ("quantity", "value"),
                  (("|theta_c|^2, exact", c["norm2"]), ("|theta_c|^2", f"{float(norm2):.6e}"),
                   ("parameters", str(records[0]["parameters"])),
                   ("eps where the bound is 1", f"{1 / float(norm2):.3e}"),
                   ("float64 bound on its outputs (certificate)", "none" if c["float_bound"] is None
                    else f"{float(Fraction(c['float_bound'])):.3e}"),
                   ("its float64 set loss, measured", f"{c['set_loss_float64']:.3e}"),
                   (f"its float64 set loss, {c['slack_source']} bound", f"{c['set_loss_slack']:.3e}")))
    steps = sorted({r["steps"] for r in records})
    table = Table(f"{steps[0]} Adam steps each; objective = set loss + eps*|theta|^2 (float64); bound = "
                  "eps*|theta_c|^2; FLAGGED = objective above the bound plus theta_c's float64 rounding slack",
                  ("start", "eps", "objective", "set loss", "eps*|theta|^2", "bound", "flag"), tuple(runs))
    fits = Table("fitted log-log slope over eps (global minima give a slope <= 1, tending to 1 as eps -> 0)",
                 ("start", "slope of objective", "slope of set loss", "runs flagged"), tuple(slopes))
    flagged = sum(r["flagged"] for r in records)
    verdict = (f"{flagged} of {len(records)} runs flagged (provably not at the global minimum); slopes of the "
               "objective: " + ", ".join(f"{label} {slope}" for label, slope, _, _ in slopes))
    rows.insert(0, {"theta_c": c, "parameters": records[0]["parameters"]})
    return Result(NAME, quick, device, CLAIM, CRITERION, QUICK_SCOPE if quick else FULL_SCOPE, verdict,
                  (theta, table, fits), tuple(rows), "eps", tuple(series), tuple(records), log_x=True,
                  claimant=PAPER, y_label="objective, set loss", baseline=None)
