"""Feed-forward "hats": x ↦ x + δ·h(w·x) with
h(t) = (σ(t−p+ε) − 2σ(t−p) + σ(t−p−ε))/ε, which is 1 at t = p and 0 outside
(p−ε, p+ε). Three ReLU units per hat; several hats with disjoint windows can
share one FF layer."""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass

from flint import fmpq

from tfcert.verify.formats import FF, SA, Block, LowRank
from tfcert.verify.numbers import Vec, dot, scale

ZERO, ONE = fmpq(0), fmpq(1)


@dataclass(frozen=True)
class Hat:
    """Move every token whose projection on ``w`` is ``p`` by ``delta``."""
    w: Vec
    p: fmpq
    eps: fmpq
    delta: Vec
    moves: tuple[tuple[int, int], ...]  # [sequence file index, token index]
    to: Vec

    @property
    def window(self) -> tuple[fmpq, fmpq]:
        return self.p - self.eps, self.p + self.eps


def hat_ff(hats: list[Hat], d: int) -> FF:
    """One FF layer (η = 1) holding ``hats`` side by side."""
    U, b, cols = [], [], []
    for hat in hats:
        for offset, weight in ((hat.eps, ONE), (ZERO, fmpq(-2)), (-hat.eps, ONE)):
            U.append(hat.w)
            b.append(offset - hat.p)
            cols.append(scale(weight / hat.eps, hat.delta))
    W = tuple(tuple(col[i] for col in cols) for i in range(d))
    return FF(ONE, tuple(U), tuple(b), W)


def identity_sa() -> SA:
    return SA(ONE, LowRank(ZERO), LowRank(ZERO))


def hat_claims(hats: list[Hat], block: int, margins: list[fmpq | None]) -> list[dict]:
    """The certificate's claim for each hat of one FF layer."""
    return [{"kind": "hat", "block": block, "units": [3 * k, 3 * k + 1, 3 * k + 2],
             "window": [str(h.window[0]), str(h.window[1])],
             "moves": [list(m) for m in h.moves], "to": [str(v) for v in h.to],
             "margin": None if m is None else str(m)}
            for k, (h, m) in enumerate(zip(hats, margins))]


def margin(sorted_keys: list[fmpq], window: tuple[fmpq, fmpq]) -> fmpq | None:
    """Distance from the window to the nearest projection outside it."""
    lo, hi = window
    start, stop = bisect_right(sorted_keys, lo), bisect_left(sorted_keys, hi)
    outside = ([lo - sorted_keys[start - 1]] if start > 0 else []) + (
        [sorted_keys[stop] - hi] if stop < len(sorted_keys) else [])
    return min(outside) if outside else None


def hat_blocks(hats: list[Hat], per_layer: int, d: int, first_block: int,
               projections: dict[tuple[int, int], fmpq]) -> tuple[list[Block], list[dict]]:
    """Pack hats ``per_layer`` to an FF layer (identity attention), tracking
    every token's projection on the hats' common direction (kept sorted) to
    state margins."""
    keys = sorted(projections.values())
    blocks, claims = [], []
    for start in range(0, len(hats), per_layer):
        group = hats[start:start + per_layer]
        claims += hat_claims(group, first_block + len(blocks), [margin(keys, h.window) for h in group])
        blocks.append(Block(hat_ff(group, d), identity_sa()))
        for h in group:
            landed = dot(h.w, h.to)
            for ref in h.moves:
                del keys[bisect_left(keys, projections[ref])]
                insort(keys, landed)
                projections[ref] = landed
    return blocks, claims


def direction(values: list[Vec], d: int, attempt_start: int = 0) -> Vec:
    """A direction w = (1, r_2, …, r_d), |r_i| ≤ 1/16, on which the given
    distinct points have pairwise distinct projections. Simple choices collide
    on small-integer data, so candidates come from a fixed pseudo-random
    sequence (deterministic) and are checked exactly."""
    state = 12345 + attempt_start
    for _ in range(10_000):
        coords = [ONE]
        for _ in range(d - 1):
            state = (state * 1103515245 + 12345) % 2**31
            coords.append(fmpq(state % 513 - 256, 4096))
        w = tuple(coords)
        if len({dot(w, x) for x in values}) == len(values):
            return w
    raise RuntimeError("no separating direction found")  # measure-zero failure: a bug


def min_gap(sorted_values: list[fmpq]) -> fmpq | None:
    gaps = [b - a for a, b in zip(sorted_values, sorted_values[1:])]
    return min(gaps) if gaps else None
