"""Training: one Adam loop for a bank of models (bank.py), fresh samples every step, held-out NMSE.

Two layers, so that later experiments can reuse the first:

* ``optimise(flat, rates, losses, config, …)`` is the generic loop: Adam on the (M, P)
  parameters with a rate per member, gradient clipping *per member* (a global clip would couple
  the members), linear warm-up then cosine decay, an optional wall-clock deadline, and
  checkpoint callbacks. At the deadline it either cuts the step count (a fixed budget: the run
  ends with fewer steps) or pauses: it stops with its whole state (``Progress``) so that a later
  process continues the same run, step for step, as if it had never stopped — how a schedule
  longer than one session is trained. ``losses(step)`` returns the (M,) vector of the members' losses, so any
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
class Progress:
    """Where the Adam loop stands after ``step`` of ``steps``: with the parameters, what a
    continuation needs (the moments; the step count, which a cut may have lowered) and the
    seconds spent so far."""

    step: int
    steps: int
    m1: torch.Tensor
    m2: torch.Tensor
    seconds: float


@dataclass
class Optimised:
    steps: int  # steps actually run (fewer than asked only under a cutting deadline)
    seconds: float  # over every process that ran a part of it
    last_loss: list[float] = field(default_factory=list)
    paused: Progress | None = None  # set when a pausing deadline stopped the run before its end


def optimise(flat: torch.Tensor, rates: torch.Tensor, losses: Callable[[int], torch.Tensor],
             config: TrainConfig, log: Log, label: str, deadline: float | None = None,
             checkpoint: Callable[[int, int], None] | None = None, pause: bool = False,
             resume: Progress | None = None) -> Optimised:
    """Adam on ``flat`` (M, P), in place. ``rates``: (M,) base rates. ``losses(step)``: (M,)
    losses. ``deadline``: a ``time.perf_counter()`` value; from step ``PROBE`` on, the step
    count is cut (never raised) so that the run ends before it, and the cosine follows the new
    count — or, with ``pause``, the run stops after the last step that ends in time and returns
    its ``Progress``; ``resume`` (with ``flat`` as it was then) continues it. ``checkpoint(step,
    steps)`` is called at ``config.checkpoints`` evenly spaced steps, the last one after the
    final step."""
    start = time.perf_counter()
    flat.requires_grad_(True)
    b1, b2 = config.betas
    rates = rates.to(flat)[:, None]
    if resume is None:
        resume = Progress(0, config.steps, torch.zeros_like(flat), torch.zeros_like(flat), 0.0)
    m1, m2, steps = resume.m1.to(flat), resume.m2.to(flat), resume.steps

    def marks() -> set[int]:
        return {round(steps * (i + 1) / config.checkpoints) for i in range(config.checkpoints)}
    due = marks()
    probe_start, probe_step = start, resume.step + 10
    loss = torch.zeros(flat.shape[0])
    step = resume.step
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
        if step == probe_step:
            probe_start = time.perf_counter()
        if step % config.log_every == 0 or step == steps:
            v = loss.detach()
            log(f"{label}: step {step}/{steps} loss {v.mean().item():.3e} "
                f"(members {v.min().item():.2e}..{v.max().item():.2e})")
        ran = step - resume.step
        timed = deadline is not None and (ran == PROBE or (ran > PROBE and step % config.log_every == 0))
        if timed:
            # Timed from 10 steps into this process on, past the first steps' one-off costs
            # (allocation, kernel selection).
            float(loss.detach().sum())  # wait for the device: time what it has done, not what is queued
            per_step = (time.perf_counter() - probe_start) / (step - probe_step)
            affordable = step + int((deadline - time.perf_counter()) / per_step * 0.92)
            if not pause and affordable < steps:  # cut (never raise) the step count
                new = max(step + 1, affordable)
                log(f"{label}: deadline: {steps} steps cut to {new}")
                steps = new
                due = marks()
        if checkpoint is not None and step in due:
            checkpoint(step, steps)
        if timed and pause and step < steps and affordable < step + config.log_every:  # the next check comes too late
            log(f"{label}: deadline: paused after step {step}/{steps}")
            flat.requires_grad_(False)
            seconds = resume.seconds + time.perf_counter() - start
            return Optimised(step, seconds, [float(v) for v in loss.detach().cpu()],
                             Progress(step, steps, m1.detach().clone(), m2.detach().clone(), seconds))
    flat.requires_grad_(False)
    return Optimised(steps, resume.seconds + time.perf_counter() - start, [float(v) for v in loss.detach().cpu()])


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


@dataclass
class Paused:
    """A bank's training stopped by a pausing deadline: all that ``train_bank(…, resume=…)``
    needs to go on exactly where it stopped — the parameters, the optimiser's ``Progress``, the
    states of the training-data generators and the NMSE curve so far."""

    flat: torch.Tensor
    progress: Progress
    generators: list[torch.Tensor]
    curve: list[tuple[int, list[float]]]

    def to_json(self) -> dict:
        """Plain tensors, numbers and lists: what ``torch.load(weights_only=True)`` reads back."""
        p = self.progress
        return {"flat": self.flat, "m1": p.m1, "m2": p.m2, "step": p.step, "steps": p.steps,
                "seconds": p.seconds, "generators": self.generators,
                "curve": [[step, list(v)] for step, v in self.curve]}

    @staticmethod
    def from_json(state: dict) -> Paused:
        return Paused(state["flat"], Progress(state["step"], state["steps"], state["m1"], state["m2"],
                                              state["seconds"]),
                      list(state["generators"]), [(step, list(v)) for step, v in state["curve"]])


def train_bank(bank: Bank, tasks: tuple[Task, ...], streams: tuple[int, ...], config: TrainConfig,
               log: Log, label: str, deadline: float | None = None,
               flat: torch.Tensor | None = None, pause: bool = False,
               resume: Paused | None = None) -> Trained | Paused:
    """Train every member of ``bank``: member i learns column ``column`` of ``tasks[task]`` on
    data stream ``streams[stream]``; all members take the same number of steps. With ``pause``,
    a deadline stops the run and returns where it stands (``Paused``); ``resume`` continues it,
    and the two parts together give the same result, bit for bit on one device, as a run that
    never stopped."""
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

    if resume is not None:
        flat = resume.flat.to(device, dtype).clone()
        for gen, state in zip((gen for _, gens in groups for gen in gens), resume.generators, strict=True):
            gen.set_state(state)
    elif flat is None:
        flat = bank.init()
    curve: list[tuple[int, list[float]]] = [] if resume is None else list(resume.curve)

    def checkpoint(step: int, steps: int) -> None:
        curve.append((step, evaluate()))
        shown = curve[-1][1]
        log(f"{label}: step {step}/{steps} held-out NMSE " + " ".join(f"{v:.2e}" for v in shown[:8])
            + (f" … ({len(shown)} models)" if len(shown) > 8 else ""))

    done = optimise(flat, torch.tensor([m.lr for m in bank.members]), losses, config, log, label,
                    deadline, checkpoint, pause, None if resume is None else resume.progress)
    if done.paused is not None:
        return Paused(flat.detach().clone(), done.paused,
                      [gen.get_state() for _, gens in groups for gen in gens], curve)
    return Trained(curve[-1][1], curve, done.steps, done.seconds, flat.detach())
