"""A bank of small softmax transformers trained side by side as one batched model.

Every model of a bank shares the *padded* shapes (token dimension d, embedding E, layers L,
heads per layer H, per-head dimension, MLP width F); each *member* uses a subset of them,
selected by 0/1 masks: its own heads per layer, its own MLP width per layer, and its own number
of layers (a masked layer is the identity). A masked head, hidden unit or layer contributes
nothing to the output, so its parameters get a zero gradient and, under Adam, never move: a
member computes exactly the function of the smaller model it stands for, and its parameter
count (``Member.parameters``) counts only what it uses. All parameters of all members live in
one tensor of shape (M, P) — one row per member — so the whole bank is one forward pass, one
backward pass and one Adam update (train.py), which is what makes hundreds of tiny models cheap
on one GPU.

The architecture (docs/experiments.md, each choice following InfoFlow's abstraction):

* tokens x_t ∈ R^d are embedded by one affine map into E dims; **no positional encoding**;
* the output is read at an extra position T+1 holding a learned vector; attention sources are
  the inputs 1..T only, for every query;
* each layer: multi-head softmax attention (scores scaled by 1/√head_dim), residual, an MLP,
  residual. MLP ``relu``: W2·relu(W1 h + b1) + b2. MLP ``bilinear``: W2·((W1 h + b1) ⊙
  (G h + g)) + b2 (a gated linear unit without a nonlinearity: it represents a quadratic form
  of the stream exactly, where a ReLU MLP only approximates one);
* **no LayerNorm** (it would rescale x_s inside the bilinear scores ⟨x_t, M x_s⟩).

In the last layer only the readout position is computed (queries, MLP): nothing else reaches
the output, so the function is unchanged.
"""
from __future__ import annotations

import math

import torch

from tfcert.experiments.spec import Member, Shape


def _layout(shape: Shape) -> list[tuple[str, tuple[int, ...], int]]:
    """(name, shape without the member axis, fan_in for the init) of every parameter."""
    E, ha, F = shape.E, shape.heads * shape.head_dim, shape.hidden
    out = [("embed.w", (shape.d, E), shape.d), ("embed.b", (E,), shape.d),
           ("readout_token", (E,), 0), ("read.w", (E,), E), ("read.b", (1,), E)]
    for l in range(shape.layers):
        out += [(f"{l}.q.w", (E, ha), E), (f"{l}.q.b", (ha,), E), (f"{l}.k.w", (E, ha), E),
                (f"{l}.k.b", (ha,), E), (f"{l}.v.w", (E, ha), E), (f"{l}.v.b", (ha,), E),
                (f"{l}.o.w", (ha, E), ha), (f"{l}.o.b", (E,), ha),
                (f"{l}.w1", (E, F), E), (f"{l}.b1", (F,), E)]
        if shape.mlp == "bilinear":
            out += [(f"{l}.g", (E, F), E), (f"{l}.gb", (F,), E)]
        out += [(f"{l}.w2", (F, E), F), (f"{l}.b2", (E,), F)]
    return out


class Bank:
    """M members over one ``Shape``; parameters are a (M, P) tensor, ``forward(flat, x)``."""

    def __init__(self, shape: Shape, members: tuple[Member, ...], device: torch.device,
                 dtype: torch.dtype = torch.float32) -> None:
        for m in members:
            if not 1 <= len(m.heads) <= shape.layers or len(m.hidden) != len(m.heads):
                raise ValueError(f"member {m}: needs 1..{shape.layers} layers, one width per layer")
            if max(m.heads) > shape.heads or max(m.hidden) > shape.hidden or min(m.heads) < 1:
                raise ValueError(f"member {m}: heads/width exceed the bank's shape {shape}")
        self.shape, self.members, self.device, self.dtype = shape, members, device, dtype
        self.layout = _layout(shape)
        self.size = sum(math.prod(s) for _, s, _ in self.layout)
        M, L, H, F = len(members), shape.layers, shape.heads, shape.hidden
        head_mask = torch.zeros(M, L, H)
        hidden_mask = torch.zeros(M, L, F)
        layer_mask = torch.zeros(M, L)
        for i, m in enumerate(members):
            for l, (h, f) in enumerate(zip(m.heads, m.hidden)):
                head_mask[i, l, :h] = 1
                hidden_mask[i, l, :f] = 1
                layer_mask[i, l] = 1
        self.head_mask = head_mask.to(device, dtype)
        self.hidden_mask = hidden_mask.to(device, dtype)
        self.layer_mask = layer_mask.to(device, dtype)

    def parameter_counts(self) -> list[int]:
        return [m.parameters(self.shape) for m in self.members]

    def init(self) -> torch.Tensor:
        """PyTorch's default initialisation (uniform ±1/√fan_in, the readout vector N(0, 1/E)),
        times ``init_scale``, drawn per member from a CPU generator seeded by its ``seed``
        (members with one seed start alike); masked entries are zero."""
        rows = []
        for i, m in enumerate(self.members):
            g = torch.Generator().manual_seed(m.seed)
            parts = []
            for name, s, fan_in in self.layout:
                if fan_in == 0:
                    parts.append(torch.randn(s, generator=g, dtype=torch.float64) / self.shape.E ** 0.5)
                else:
                    parts.append((torch.rand(s, generator=g, dtype=torch.float64) * 2 - 1) / fan_in ** 0.5)
            rows.append(torch.cat([p.flatten() for p in parts]))
        flat = (torch.stack(rows) * self.shape.init_scale).to(self.device, self.dtype)
        return self._zero_masked(flat)

    def _zero_masked(self, flat: torch.Tensor) -> torch.Tensor:
        """Zero the parameters a member does not use (so ‖θ‖ and saved weights are its own)."""
        v = self.views(flat)
        a = self.shape.head_dim
        with torch.no_grad():
            for l in range(self.shape.layers):
                heads = self.head_mask[:, l].repeat_interleave(a, dim=1)  # (M, H·a)
                lm = self.layer_mask[:, l, None]
                for key in ("q", "k", "v"):
                    v[f"{l}.{key}.w"].mul_(heads[:, None, :])
                    v[f"{l}.{key}.b"].mul_(heads)
                v[f"{l}.o.w"].mul_(heads[:, :, None] * lm[:, :, None])
                v[f"{l}.o.b"].mul_(lm)
                hidden = self.hidden_mask[:, l]
                for key in ("w1", "g") if self.shape.mlp == "bilinear" else ("w1",):
                    v[f"{l}.{key}"].mul_(hidden[:, None, :])
                for key in ("b1", "gb") if self.shape.mlp == "bilinear" else ("b1",):
                    v[f"{l}.{key}"].mul_(hidden)
                v[f"{l}.w2"].mul_(hidden[:, :, None] * lm[:, :, None])
                v[f"{l}.b2"].mul_(lm)
        return flat

    def views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named views (M, *shape) into the flat (M, P) parameters."""
        out, offset = {}, 0
        for name, s, _ in self.layout:
            n = math.prod(s)
            out[name] = flat[:, offset:offset + n].view(flat.shape[0], *s)
            offset += n
        return out

    def forward(self, flat: torch.Tensor, x: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """x of shape (M, B, T, d) → ŷ of shape (M, B), read at position T+1. ``index``: the
        members that ``flat`` (and x) hold, when not all of them."""
        p = self.views(flat)
        masks = (self.head_mask, self.hidden_mask, self.layer_mask)
        head_mask, hidden_mask, layer_mask = masks if index is None else (m[index] for m in masks)
        M, B, T, _ = x.shape
        E, H, a = self.shape.E, self.shape.heads, self.shape.head_dim
        tokens = torch.baddbmm(p["embed.b"][:, None], x.reshape(M, B * T, -1), p["embed.w"])
        h = torch.cat([tokens.view(M, B, T, E), p["readout_token"][:, None, None].expand(M, B, 1, E)], dim=2)
        for l in range(self.shape.layers):
            last = l == self.shape.layers - 1
            queries = h[:, :, T:] if last else h  # the last layer: the readout only
            P = queries.shape[2]
            src = h[:, :, :T].reshape(M, B * T, E)

            def lin(z: torch.Tensor, key: str) -> torch.Tensor:
                return torch.baddbmm(p[f"{l}.{key}.b"][:, None], z, p[f"{l}.{key}.w"])
            q = lin(queries.reshape(M, B * P, E), "q").view(M, B, P, H, a).transpose(2, 3)
            k = lin(src, "k").view(M, B, T, H, a).transpose(2, 3)
            v = lin(src, "v").view(M, B, T, H, a).transpose(2, 3)
            weights = torch.softmax(q @ k.transpose(-1, -2) / a ** 0.5, dim=-1)
            heads = (weights @ v) * head_mask[:, l, None, :, None, None]  # (M, B, H, P, a)
            attended = heads.transpose(2, 3).reshape(M, B * P, H * a)
            lm = layer_mask[:, l, None, None]
            z = queries.reshape(M, B * P, E) + lm * lin(attended, "o")
            hidden = torch.baddbmm(p[f"{l}.b1"][:, None], z, p[f"{l}.w1"])
            if self.shape.mlp == "relu":
                hidden = torch.relu(hidden)
            else:
                hidden = hidden * torch.baddbmm(p[f"{l}.gb"][:, None], z, p[f"{l}.g"])
            hidden = hidden * hidden_mask[:, l, None]
            z = z + lm * torch.baddbmm(p[f"{l}.b2"][:, None], hidden, p[f"{l}.w2"])
            h = z.view(M, B, P, E)
        read = h[:, :, -1]  # (M, B, E): position T+1
        return (read * p["read.w"][:, None]).sum(-1) + p["read.b"]
