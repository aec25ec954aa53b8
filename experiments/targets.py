"""The two target families of seed 004's experiments, as batched torch functions.

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

Inputs are i.i.d. standard normal tokens x_t ∈ R^d.
"""
from __future__ import annotations

import numpy as np
import torch

MATRIX_SEED = 2605_17930
INTRINSIC_D_IN = 4
MAX_INTRINSIC_DIM = INTRINSIC_D_IN * (INTRINSIC_D_IN - 1) // 2
TRIANGLE_D_IN = 2


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
    scores = torch.einsum("btd,kde,bse->bkts", x, M.to(x), x)
    T = x.shape[1]
    diagonal = torch.eye(T, dtype=torch.bool, device=x.device)
    return scores.masked_fill(diagonal, float("inf")).amin(dim=(2, 3)).sum(dim=1)


def triangle_center(x: torch.Tensor) -> torch.Tensor:
    """y[b] = min over t1<t2<t3 of ‖x[b,t1] + x[b,t2] + x[b,t3]‖² for x of shape (B, T, d), T ≥ 3."""
    triples = torch.combinations(torch.arange(x.shape[1], device=x.device), r=3)
    return x[:, triples].sum(dim=2).square().sum(dim=-1).amin(dim=1)


def sample_inputs(batch: int, T: int, d: int, generator: torch.Generator,
                  device: torch.device) -> torch.Tensor:
    """Standard normal tokens, drawn on the CPU generator so runs are reproducible on any device."""
    return torch.randn(batch, T, d, generator=generator, dtype=torch.float32).to(device)
