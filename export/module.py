"""The PyTorch module: block = SA ∘ FF exactly as the model format defines it
(docs/certificates.md, verify/evaluate.py), evaluated in one float dtype.

    FF(x)  = η x + W relu(U x + b)
    SA(x)_i = ρ x_i + V Σ_l π_il x_l,   scores s_il = ⟨A x_i, x_l⟩,
    A, V   = scale·I + Σ_k u_k v_kᵀ     (kept in that low-rank form: A x = scale·x + Σ_k u_k (v_k·x))

hardmax: π_i is uniform over the argmax set {l : s_il == max_l s_il} (exact float equality), computed
as (Σ_{l in set} x_l) / |set|; softmax: π_i = softmax(s_i / τ).

In float16 and bfloat16 every matrix product and softmax's Σ exp add one term at a time in the
dtype (``matmul``, ``softmax``): torch's own accumulate in float32 and round once, a run the float
claim does not speak about (docs/float.md, "The float run it speaks about"); each elementwise
operation torch computes in float32 and rounds once, which is the correctly rounded result.

This module imports torch; ``tfcert.export`` imports it only when a function needs it.
"""
from __future__ import annotations

import torch
from torch import nn

TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
                "bfloat16": torch.bfloat16}

FF_NAMES = ("eta", "U", "b", "W")
SA_NAMES = ("rho", "A_scale", "A_u", "A_v", "V_scale", "V_u", "V_v")


def dtype_name(dtype) -> str:
    """"float64" / "float32" / "float16" / "bfloat16" from a torch dtype or a name."""
    for name, t in TORCH_DTYPES.items():
        if dtype in (name, t):
            return name
    raise ValueError(f"dtype must be float64, float32, float16 or bfloat16, got {dtype!r}")


NARROW = (torch.float16, torch.bfloat16)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b; in float16 and bfloat16 as a sum of rounded products, each added in the dtype in
    turn — a run of the float model, where torch's matmul (float32 accumulation) is not."""
    if a.dtype not in NARROW or a.shape[-1] == 0:
        return a @ b
    out = a[..., :, :1] * b[..., :1, :]
    for k in range(1, a.shape[-1]):
        out = out + a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return out


def softmax(z: torch.Tensor) -> torch.Tensor:
    """softmax over the last axis; in float16 and bfloat16 exp(z − max) divided by its sum, added
    in the dtype in turn (torch.softmax computes in float32 and rounds once)."""
    if z.dtype not in NARROW:
        return torch.softmax(z, dim=-1)
    e = torch.exp(z - z.amax(dim=-1, keepdim=True))
    return e / matmul(e, torch.ones(e.shape[-1], 1, dtype=e.dtype, device=e.device))  # each e·1 exact


class FeedForward(nn.Module):
    def __init__(self, eta: torch.Tensor, U: torch.Tensor, b: torch.Tensor, W: torch.Tensor):
        super().__init__()
        for name, t in zip(FF_NAMES, (eta, U, b, W)):
            self.register_buffer(name, t)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.eta * x + matmul(torch.relu(matmul(x, self.U.T) + self.b), self.W.T)


def _low_rank(scale: torch.Tensor, u: torch.Tensor, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """(scale·I + Σ u_k v_kᵀ) applied to every row of x (rows are tokens)."""
    out = scale * x
    if u.shape[0]:
        out = out + matmul(matmul(x, v.T), u)
    return out


class Attention(nn.Module):
    def __init__(self, rho, A_scale, A_u, A_v, V_scale, V_u, V_v, attention: str):
        super().__init__()
        for name, t in zip(SA_NAMES, (rho, A_scale, A_u, A_v, V_scale, V_u, V_v)):
            self.register_buffer(name, t)
        self.attention = attention

    def forward(self, x: torch.Tensor, keys: torch.Tensor, tau: torch.Tensor | None) -> torch.Tensor:
        """x: (B, n, d); keys: (B, 1, n) bool, False at padding; tau: the model's 0-d temperature (softmax)."""
        s = matmul(_low_rank(self.A_scale, self.A_u, self.A_v, x), x.transpose(-1, -2))  # s[b, i, l] = ⟨A x_i, x_l⟩
        s = s.masked_fill(~keys, float("-inf"))
        if self.attention == "hardmax":
            chosen = (s == s.amax(dim=-1, keepdim=True)) & keys
            chosen = chosen.to(x.dtype)
            mixed = matmul(chosen, x) / chosen.sum(dim=-1, keepdim=True)
        else:
            mixed = matmul(softmax(s / tau), x)
        return self.rho * x + _low_rank(self.V_scale, self.V_u, self.V_v, mixed)


class Block(nn.Module):
    def __init__(self, ff: FeedForward, sa: Attention):
        super().__init__()
        self.ff = ff
        self.sa = sa


class Transformer(nn.Module):
    """A tfcert model in one float dtype. ``forward`` takes

    * a list of sequences (each an (n_i, d) tensor, array or nested list) → a list of (n_i, d) tensors;
    * one (n, d) tensor → an (n, d) tensor;
    * a padded (B, n, d) tensor and optional ``lengths`` (B,) → a (B, n, d) tensor whose padding is 0.

    Inputs are moved to the module's device and dtype. Floats are rounded once by torch; exact numbers
    (Fraction, fmpq, int, number strings) in nested lists are rounded exactly (``tfcert.export.encode``).
    """

    def __init__(self, d: int, attention: str, blocks: list[dict[str, torch.Tensor]],
                 temperature: torch.Tensor | None = None, meta: dict | None = None):
        super().__init__()
        if attention not in ("hardmax", "softmax"):
            raise ValueError(f"attention must be hardmax or softmax, got {attention!r}")
        self.d = d
        self.attention = attention
        self.meta = dict(meta or {})  # exact temperature, model sha256, dtype: written to the file header
        if attention == "softmax":
            if temperature is None:
                raise ValueError("a softmax model needs a temperature")
            self.register_buffer("temperature", temperature)
        else:
            self.temperature = None
        self.blocks = nn.ModuleList(
            Block(FeedForward(*(t[f"ff.{n}"] for n in FF_NAMES)),
                  Attention(*(t[f"sa.{n}"] for n in SA_NAMES), attention=attention))
            for t in blocks)

    @property
    def dtype(self) -> torch.dtype:
        for t in self.buffers():
            return t.dtype
        return torch.float64

    @property
    def device(self) -> torch.device:
        for t in self.buffers():
            return t.device
        return torch.device("cpu")

    def extra_repr(self) -> str:
        tau = f", temperature={self.meta.get('temperature')}" if self.attention == "softmax" else ""
        return f"d={self.d}, attention={self.attention}{tau}, blocks={len(self.blocks)}"

    def run_padded(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d:
            raise ValueError(f"expected a (B, n, {self.d}) tensor, got shape {tuple(x.shape)}")
        x = x.to(device=self.device, dtype=self.dtype)
        batch, n, _ = x.shape
        if lengths is None:
            valid = torch.ones(batch, n, dtype=torch.bool, device=x.device)
        else:
            lengths = torch.as_tensor(lengths, device=x.device).reshape(batch, 1)
            if bool((lengths < 1).any()) or bool((lengths > n).any()):
                raise ValueError(f"lengths must lie in [1, {n}]")
            valid = torch.arange(n, device=x.device).reshape(1, n) < lengths
        keys = valid.unsqueeze(1)  # (B, 1, n)
        tokens = valid.unsqueeze(-1)  # (B, n, 1)
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        x = torch.where(tokens, x, zero)
        for block in self.blocks:
            x = torch.where(tokens, block.ff(x), zero)  # padding stays 0, so no inf·0 reaches a mean
            x = torch.where(tokens, block.sa(x, keys, self.temperature), zero)
        return x

    def forward(self, x, lengths=None):
        if isinstance(x, torch.Tensor):
            if x.dim() == 2:
                return self.run_padded(x.unsqueeze(0))[0]
            return self.run_padded(x, lengths)
        if lengths is not None:
            raise ValueError("lengths go with a padded (B, n, d) tensor, not with a list of sequences")
        from tfcert.export import encode
        seqs = [encode(s, self.dtype, self.device) for s in x]
        if not seqs:
            return []
        for k, s in enumerate(seqs):
            if s.dim() != 2 or s.shape[1] != self.d or s.shape[0] < 1:
                raise ValueError(f"sequence {k}: expected an (n, {self.d}) array with n ≥ 1, "
                                 f"got shape {tuple(s.shape)}")
        sizes = [s.shape[0] for s in seqs]
        padded = torch.zeros(len(seqs), max(sizes), self.d, dtype=self.dtype, device=self.device)
        for k, s in enumerate(seqs):
            padded[k, :sizes[k]] = s
        out = self.run_padded(padded, torch.tensor(sizes, device=self.device))
        return [out[k, :n] for k, n in enumerate(sizes)]
