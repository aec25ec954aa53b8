"""Training: one Adam loop for a bank of models (bank.py), fresh samples every step, held-out NMSE.

Two layers, so that later experiments can reuse the first:

* ``optimise(flat, rates, losses, config, …)`` is the generic loop: Adam on the (M, P)
  parameters with a rate per member, gradient clipping *per member* (a global clip would couple
  the members), linear warm-up then cosine decay, an optional wall-clock deadline, and
  checkpoint callbacks. ``losses(step)`` returns the (M,) vector of the members' losses, so any
  loss fits — a regression loss here, a set loss plus ε‖θ‖² for a regularisation experiment — and
  ``flat`` may start anywhere (a random initialisation, or given weights).
* ``train_bank(bank, task, streams, config, …)`` is the regression experiment on top of it:
  every batch is freshly drawn (the input law is known, so the measurement is an approximation
  error, not a generalisation gap); targets are standardised per member with a mean and a
  standard deviation estimated once from a separate sample; the reported number is
  NMSE = E[(ŷ − y)²] / Var(y) on a held-out set of its own seed (1 = predicting the mean).

Seeds: a member's initialisation comes from its ``seed``; data stream s of seed S draws its
training batches from a generator on the device seeded S + 3, its held-out set from a CPU
generator seeded S + 2, and the standardisation sample from S + 1. A run is deterministic for a
given device and bank; the training batches differ between CPU and GPU generators.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from tfcert.experiments.bank import Bank
from tfcert.experiments.spec import TrainConfig
from tfcert.experiments.targets import Task

Log = Callable[[str], None]
PROBE = 50  # the step at which a deadline first cuts the step count


def rate_factor(step: int, steps: int, warmup: float, final: float) -> float:
    """Linear warm-up over ``warmup``·steps, then cosine decay from 1 to ``final``: the decay is
    what lets the loss settle instead of hovering at Adam's noise floor."""
    warm = max(1, int(steps * warmup))
    if step < warm:
        return (step + 1) / warm
    return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))


@dataclass
class Optimised:
    steps: int  # steps actually run (fewer than asked only under a deadline)
    seconds: float
    last_loss: list[float] = field(default_factory=list)


def optimise(flat: torch.Tensor, rates: torch.Tensor, losses: Callable[[int], torch.Tensor],
             config: TrainConfig, log: Log, label: str, deadline: float | None = None,
             checkpoint: Callable[[int, int], None] | None = None) -> Optimised:
    """Adam on ``flat`` (M, P), in place. ``rates``: (M,) base rates. ``losses(step)``: (M,)
    losses. ``deadline``: a ``time.perf_counter()`` value; from step ``PROBE`` on, the step
    count is cut (never raised) so that the run ends before it, and the cosine follows the new
    count. ``checkpoint(step, steps)`` is called at ``config.checkpoints`` evenly spaced steps,
    the last one after the final step."""
    start = time.perf_counter()
    flat.requires_grad_(True)
    m1, m2 = torch.zeros_like(flat), torch.zeros_like(flat)
    b1, b2 = config.betas
    rates = rates.to(flat)[:, None]
    steps = config.steps

    def marks() -> set[int]:
        return {round(steps * (i + 1) / config.checkpoints) for i in range(config.checkpoints)}
    due = marks()
    probe_start = start
    loss = torch.zeros(flat.shape[0])
    step = 0
    while step < steps:
        step += 1
        loss = losses(step)
        grad, = torch.autograd.grad(loss.sum(), flat)
        with torch.no_grad():
            grad = grad * (config.clip / (grad.norm(dim=1, keepdim=True) + 1e-12)).clamp(max=1.0)
            m1.mul_(b1).add_(grad, alpha=1 - b1)
            m2.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            lr = rates * (rate_factor(step - 1, steps, config.warmup, config.final) / (1 - b1 ** step))
            flat.sub_(lr * m1 / (m2 / (1 - b2 ** step)).sqrt_().add_(1e-8))
        if step == 10:
            probe_start = time.perf_counter()
        if step % config.log_every == 0 or step == steps:
            v = loss.detach()
            log(f"{label}: step {step}/{steps} loss {v.mean().item():.3e} "
                f"(members {v.min().item():.2e}..{v.max().item():.2e})")
        if deadline is not None and (step == PROBE or (step > PROBE and step % config.log_every == 0)):
            # Cut (never raise) the step count so the run ends before the deadline; timed from
            # step 10 on, past the first steps' one-off costs (allocation, kernel selection).
            float(loss.detach().sum())  # wait for the device: time what it has done, not what is queued
            per_step = (time.perf_counter() - probe_start) / (step - 10)
            affordable = step + int((deadline - time.perf_counter()) / per_step * 0.92)
            if affordable < steps:
                new = max(step + 1, affordable)
                log(f"{label}: deadline: {steps} steps cut to {new}")
                steps = new
                due = marks()
        if checkpoint is not None and step in due:
            checkpoint(step, steps)
    flat.requires_grad_(False)
    return Optimised(steps, time.perf_counter() - start, [float(v) for v in loss.detach().cpu()])


@dataclass
class Trained:
    nmse: list[float]  # per member, held out, at the end
    curve: list[tuple[int, list[float]]]  # (step, per-member NMSE) at the checkpoints
    steps: int
    seconds: float
    flat: torch.Tensor  # the trained parameters


def _generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


@dataclass
class _Group:
    """The members that train on one task: their rows of ``flat``, streams and columns."""

    task: Task
    index: torch.Tensor  # (m,) member rows
    stream: torch.Tensor  # (m,) stream of each, 0..S-1
    column: torch.Tensor  # (m,) target column of each
    mean: torch.Tensor  # (m,) float64: standardisation of each member's target
    std: torch.Tensor
    evals: list[tuple[torch.Tensor, torch.Tensor]]  # per stream: held-out x (N, T, d), y (N, K)


def train_bank(bank: Bank, tasks: tuple[Task, ...], streams: tuple[int, ...], config: TrainConfig,
               log: Log, label: str, deadline: float | None = None,
               flat: torch.Tensor | None = None) -> Trained:
    """Train every member of ``bank``: member i learns column ``column`` of ``tasks[task]`` on
    data stream ``streams[stream]``; all members take the same number of steps."""
    device, dtype = bank.device, bank.dtype
    groups = []
    for t, task in enumerate(tasks):
        rows = [i for i, m in enumerate(bank.members) if m.task == t]
        if not rows:
            continue
        used = sorted({bank.members[i].stream for i in rows})
        stream = torch.tensor([used.index(bank.members[i].stream) for i in rows], device=device)
        column = torch.tensor([bank.members[i].column for i in rows], device=device)
        mean = torch.empty(len(rows), dtype=torch.float64, device=device)
        std = torch.empty_like(mean)
        evals = []
        exact = task.to(device, torch.float64)
        for s, u in enumerate(used):
            seed = streams[u]
            reference = exact(task.sample(8192, _generator(seed + 1), device, torch.float64))  # (N, K)
            here = stream == s
            mean[here] = reference.mean(0)[column[here]]
            std[here] = reference.std(0)[column[here]]
            x = task.sample(config.eval_size, _generator(seed + 2), device, dtype)
            evals.append((x, exact(x.double())))
        groups.append((_Group(task.to(device, dtype), torch.tensor(rows, device=device), stream, column,
                              mean, std, evals), [_generator(streams[u] + 3, device) for u in used]))

    def losses(step: int) -> torch.Tensor:
        out = torch.empty(len(bank.members), dtype=dtype, device=device)
        parts = []
        for g, generators in groups:
            x = torch.stack([g.task.sample(config.batch, gen, device, dtype) for gen in generators])
            y = g.task(x)  # (S, B, K)
            target = (y[g.stream, :, g.column] - g.mean.to(dtype)[:, None]) / g.std.to(dtype)[:, None]
            parts.append((g.index, ((bank.forward(flat[g.index], x[g.stream], g.index) - target) ** 2).mean(1)))
        return out.index_put((torch.cat([i for i, _ in parts]),), torch.cat([v for _, v in parts]))

    def evaluate() -> list[float]:
        nmse = torch.empty(len(bank.members), dtype=torch.float64, device=device)
        with torch.no_grad():
            for g, _ in groups:
                for s, (x, y) in enumerate(g.evals):
                    here = (g.stream == s).nonzero().flatten()
                    rows = g.index[here]
                    chunk = max(1, 2 ** 19 // (len(rows) * g.task.T))
                    pred = torch.cat([bank.forward(flat[rows], xs.expand(len(rows), *xs.shape), rows)
                                      for xs in x.split(chunk)], dim=1).double()
                    pred = pred * g.std[here, None] + g.mean[here, None]
                    truth = y[:, g.column[here]].T  # (m, N)
                    nmse[rows] = ((pred - truth) ** 2).mean(1) / truth.var(1)
        return nmse.cpu().tolist()

    if flat is None:
        flat = bank.init()
    curve: list[tuple[int, list[float]]] = []

    def checkpoint(step: int, steps: int) -> None:
        curve.append((step, evaluate()))
        shown = curve[-1][1]
        log(f"{label}: step {step}/{steps} held-out NMSE " + " ".join(f"{v:.2e}" for v in shown[:8])
            + (f" … ({len(shown)} models)" if len(shown) > 8 else ""))

    done = optimise(flat, torch.tensor([m.lr for m in bank.members]), losses, config, log, label,
                    deadline, checkpoint)
    return Trained(curve[-1][1], curve, done.steps, done.seconds, flat.detach())
