"""A small two-layer softmax transformer for permutation-invariant regression.

Design (each choice follows InfoFlow's abstraction, docs/experiments.md):

* tokens x_t ∈ R^d are embedded by one affine map into E dims; **no positional encoding**
  (the targets are permutation invariant; InfoFlow's ``positional=False``);
* the output is read at an **extra position T+1** holding a learned vector (InfoFlow's readout);
  attention sources are the inputs 1..T only, for every query (the readout is written to, never
  read from — as in InfoFlow, where only input positions are sources);
* each layer: multi-head softmax attention with a fixed per-head dimension (so (D−1, D) and
  (D, D) differ only in the number of heads), residual, then a ReLU MLP, residual;
* **no LayerNorm**: normalising the stream would rescale x_s inside the bilinear scores
  ⟨x_t, M x_s⟩ and so change which token attains the minimum.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    d: int
    E: int
    heads: tuple[int, ...]
    head_dim: int = 8
    mlp: int = 4  # MLP width = mlp·E

    def to_json(self) -> dict:
        return {"d": self.d, "E": self.E, "heads": list(self.heads), "head_dim": self.head_dim,
                "mlp_width": self.mlp * self.E}


class Attention(nn.Module):
    def __init__(self, E: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.q = nn.Linear(E, heads * head_dim)
        self.kv = nn.Linear(E, 2 * heads * head_dim)
        self.out = nn.Linear(heads * head_dim, E)

    def forward(self, h: torch.Tensor, sources: int) -> torch.Tensor:
        B, P, _ = h.shape
        q = self.q(h).view(B, P, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h[:, :sources]).view(B, sources, 2, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-1, -2) / self.head_dim ** 0.5, dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(B, P, -1))


class Block(nn.Module):
    def __init__(self, E: int, heads: int, head_dim: int, mlp: int) -> None:
        super().__init__()
        self.attention = Attention(E, heads, head_dim)
        self.mlp = nn.Sequential(nn.Linear(E, mlp * E), nn.ReLU(), nn.Linear(mlp * E, E))

    def forward(self, h: torch.Tensor, sources: int) -> torch.Tensor:
        h = h + self.attention(h, sources)
        return h + self.mlp(h)


class Transformer(nn.Module):
    """x of shape (B, T, d) → ŷ of shape (B,), read at position T+1."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed = nn.Linear(config.d, config.E)
        self.readout_token = nn.Parameter(torch.randn(config.E) / config.E ** 0.5)
        self.blocks = nn.ModuleList(Block(config.E, h, config.head_dim, config.mlp) for h in config.heads)
        self.readout = nn.Linear(config.E, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        h = torch.cat([self.embed(x), self.readout_token.expand(B, 1, -1)], dim=1)
        for block in self.blocks:
            h = block(h, sources=T)
        return self.readout(h[:, T]).squeeze(-1)
