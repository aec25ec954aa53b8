"""The targets of the experiments, as batched torch functions, and ``Task`` (a target at one T).

Intrinsic dimension D: y = Σ_{k=1..D} min_{t≠s} ⟨x_t, M_k x_s⟩ — D independent pairwise
comparisons, so InfoFlow needs D heads in layer 1 (one anchoring head per comparison).
The M_k are *skew-symmetric* (M_kᵀ = −M_k), unit Frobenius norm, the first D of six drawn from
a fixed generator (``MATRIX_SEED``, independent of ``--seed``: the target function never
changes between runs). Skew-symmetry is chosen so that excluding t = s costs nothing: the
diagonal ⟨x_t, M_k x_t⟩ is 0 and of every off-diagonal pair ⟨x_t, M x_s⟩ = −⟨x_s, M x_t⟩ one is
≤ 0, so min_{t≠s} = min_{t,s}. A softmax head that also sees its own token (no positional
encoding to exclude it) therefore computes the anchored value exactly. In d = 4 the skew
matrices span 6 dimensions, enough for D ≤ 6 linearly independent comparisons.

Triangle centre: y = min_{t1<t2<t3} ‖x_{t1} + x_{t2} + x_{t3}‖², one comparison of order 3.

Pairwise minimum (Theorem 1): y = min_{t≠s} ⟨x_t, x_s⟩, one comparison of order 2.

Inputs are i.i.d. normal tokens x_t ∈ R^d (standard unless a task's ``scale`` says otherwise).
Every function takes x of shape (..., T, d) and returns (..., K): K output columns, so one bank
can train models on several related targets from the same inputs (intrinsic dimension:
column D−1 is the target of dimension D).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from tfcert.experiments.spec import INTRINSIC_D_IN, TRIANGLE_D_IN

MATRIX_SEED = 2605_17930


def intrinsic_matrices(D: int, d: int = INTRINSIC_D_IN) -> torch.Tensor:
    """The fixed M_1..M_D, shape (D, d, d): skew-symmetric, Frobenius norm 1 (so each score
    ⟨x_t, M_k x_s⟩ has unit variance for standard normal tokens)."""
    if not 1 <= D <= d * (d - 1) // 2:
        raise ValueError(f"D = {D}: need 1 <= D <= {d * (d - 1) // 2} independent skew matrices in d = {d}")
    a = np.random.default_rng(MATRIX_SEED).standard_normal((d * (d - 1) // 2, d, d))[:D]
    m = a - a.transpose(0, 2, 1)
    m /= np.linalg.norm(m, axis=(1, 2), keepdims=True)
    return torch.tensor(m, dtype=torch.float64)


def intrinsic_dim(x: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """y[b] = Σ_k min_{t≠s} ⟨x[b,t], M_k x[b,s]⟩ for x of shape (B, T, d), T ≥ 2."""
    return intrinsic_columns(x, M)[..., -1]


def intrinsic_columns(x: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """Column D−1 = Σ_{k≤D} min_{t≠s} ⟨x_t, M_k x_s⟩, for D = 1..len(M); x of shape (..., T, d)."""
    scores = torch.einsum("...td,kde,...se->...kts", x, M.to(x), x)
    T = x.shape[-2]
    diagonal = torch.eye(T, dtype=torch.bool, device=x.device)
    return scores.masked_fill(diagonal, float("inf")).amin(dim=(-2, -1)).cumsum(dim=-1)


def pairwise_min(x: torch.Tensor) -> torch.Tensor:
    """y = min_{t≠s} ⟨x_t, x_s⟩ (Theorem 1's target), shape (..., 1)."""
    scores = x @ x.transpose(-1, -2)
    T = x.shape[-2]
    diagonal = torch.eye(T, dtype=torch.bool, device=x.device)
    return scores.masked_fill(diagonal, float("inf")).amin(dim=(-2, -1))[..., None]


def triangle_center(x: torch.Tensor) -> torch.Tensor:
    """y[b] = min over t1<t2<t3 of ‖x[b,t1] + x[b,t2] + x[b,t3]‖² for x of shape (B, T, d), T ≥ 3."""
    return triangle_columns(x)[..., 0]


def triangle_columns(x: torch.Tensor) -> torch.Tensor:
    """Shape (..., 1); computed in chunks of samples, as all C(T, 3) sums at once would not fit."""
    triples = torch.combinations(torch.arange(x.shape[-2], device=x.device), r=3)
    flat = x.reshape(-1, *x.shape[-2:])
    chunk = max(1, 2 ** 22 // len(triples))
    out = torch.cat([part[:, triples].sum(dim=-2).square().sum(dim=-1).amin(dim=-1) for part in flat.split(chunk)])
    return out.reshape(*x.shape[:-2], 1)


@dataclass(frozen=True)
class Task:
    """A target at one sequence length: ``task(x)`` maps (..., T, d) to (..., columns)."""

    name: str
    T: int
    d: int
    columns: int
    fn: Callable[..., torch.Tensor]  # fn(x) or fn(x, matrices)
    scale: float = 1.0  # standard deviation of the token entries
    matrices: torch.Tensor | None = None  # the target's fixed matrices, if any

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.matrices is None:
            return self.fn(x)
        M = self.matrices
        return self.fn(x, M if M.device == x.device and M.dtype == x.dtype else M.to(x))

    def to(self, device: torch.device | str, dtype: torch.dtype) -> Task:
        """The same task with its matrices on ``device`` (no copy per call while training)."""
        return self if self.matrices is None else replace(self, matrices=self.matrices.to(device, dtype))

    def sample(self, batch: int, generator: torch.Generator, device: torch.device | str,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Normal tokens (batch, T, d), drawn by ``generator`` on its device, moved to ``device``."""
        x = torch.randn(batch, self.T, self.d, generator=generator, device=generator.device, dtype=dtype)
        return (x * self.scale if self.scale != 1 else x).to(device)


def intrinsic_task(T: int, D_max: int, scale: float = 1.0) -> Task:
    """Columns D = 1..D_max of the intrinsic-dimension family at length T."""
    return Task(f"intrinsic-dim:D<={D_max}", T, INTRINSIC_D_IN, D_max, intrinsic_columns, scale,
                intrinsic_matrices(D_max))


def pairwise_task(T: int, d: int) -> Task:
    return Task("pairwise-min", T, d, 1, pairwise_min)


def triangle_task(T: int) -> Task:
    return Task("triangle-center", T, TRIANGLE_D_IN, 1, triangle_columns)
