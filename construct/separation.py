"""Phase 1, separation: make every token of the whole dataset distinct.

One block: the FF contracts (x ↦ κx + z0) and the SA with A = 0 adds λ times
the sequence mean. Shifted tokens κ(x + λμ_j) + (1+λ)z0 collide only for
finitely many λ — unless two sequences share a token and have equal means.
Those are first told apart by "bumps": a hat moving one token value c (in one
sequence, not the other) by a small δ. Each bump splits a class of equal
means without merging any two others, so at most N − 1 are needed.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations, count

from flint import fmpq

from tfcert.construct.hats import Hat, direction, hat_blocks, min_gap
from tfcert.verify.evaluate import mean
from tfcert.verify.formats import FF, SA, Block, Dataset, LowRank
from tfcert.verify.numbers import Vec, add, dot, norm1, scale, unit

ONE, ZERO = fmpq(1), fmpq(0)
RADIUS = fmpq(1, 8)  # every token ends within this 1-norm distance of e1


def small_rationals():
    """1, 1/2, 2, 1/3, 3, 2/3, 3/2, …: candidates with small denominators first."""
    for total in count(2):
        for q in range(1, total):
            p = total - q
            if fmpq(p, q).p == p:  # in lowest terms
                yield fmpq(p, q)


@dataclass(frozen=True)
class Phase:
    """A phase of the construction: the blocks it adds to the model, the block
    range its claims speak about, and the claims."""
    name: str
    span: tuple[int, int]
    blocks: tuple[Block, ...]
    claims: tuple[dict, ...]


def _means(seqs: list[list[Vec]]) -> list[Vec]:
    return [mean(s, range(len(s))) for s in seqs]


def _clash(seqs: list[list[Vec]]) -> tuple[int, int] | None:
    """Two sequences with equal means and a shared token, if any."""
    by_mean = defaultdict(list)
    for j, mu in enumerate(_means(seqs)):
        by_mean[mu].append(j)
    for group in by_mean.values():
        for a, b in combinations(group, 2):
            if set(seqs[a]) & set(seqs[b]):
                return a, b
    return None


def _bump(seqs: list[list[Vec]], a: int, b: int, d: int) -> tuple[Vec, Vec]:
    """A value c in one sequence only and a shift δ that separates the means of
    ``a`` and ``b`` while keeping all other distinct means distinct."""
    only = [x for x in seqs[a] if x not in set(seqs[b])] or [x for x in seqs[b] if x not in set(seqs[a])]
    c = only[0]
    values = {x for s in seqs for x in s}
    old = _means(seqs)
    e = tuple(fmpq(1, k + 1) for k in range(d))
    for s in small_rationals():
        delta = scale(s, e)
        if add(c, delta) in values:
            continue
        moved = [[add(x, delta) if x == c else x for x in seq] for seq in seqs]
        new = _means(moved)
        owners = defaultdict(set)
        for mu_new, mu_old in zip(new, old):
            owners[mu_new].add(mu_old)
        if new[a] != new[b] and all(len(o) == 1 for o in owners.values()):
            return c, delta
    raise AssertionError("unreachable")


def bumps(dataset: Dataset, per_layer: int) -> tuple[Phase, list[list[Vec]]]:
    """Tie-break blocks; returns the phase and the tokens after it."""
    d = dataset.d
    seqs = [list(p.input) for p in dataset.pairs]
    blocks, claims = [], []
    while (pair := _clash(seqs)) is not None:
        c, delta = _bump(seqs, *pair, d)
        values = sorted({x for s in seqs for x in s})
        w = direction(values, d)
        projections = {(p.index, i): dot(w, x) for p, s in zip(dataset.pairs, seqs) for i, x in enumerate(s)}
        keys = sorted(set(projections.values()))
        p = dot(w, c)
        k = keys.index(p)
        eps = (min_gap(keys[max(k - 1, 0):k + 2]) or ONE) / 2
        moves = tuple((q.index, i) for q, s in zip(dataset.pairs, seqs) for i, x in enumerate(s) if x == c)
        new_blocks, new_claims = hat_blocks([Hat(w, p, eps, delta, moves, add(c, delta))], per_layer, d,
                                            len(blocks), projections)
        blocks += new_blocks
        claims += new_claims
        seqs = [[add(x, delta) if x == c else x for x in s] for s in seqs]
    return Phase("bump", (0, len(blocks)), tuple(blocks), tuple(claims)), seqs


def separation(dataset: Dataset, seqs: list[list[Vec]], block: int) -> tuple[Phase, list[list[Vec]], Vec]:
    """The contraction + mean-shift block. Returns the phase, the tokens after
    it (all within RADIUS of e1, pairwise distinct) and a direction on which
    their projections are distinct (the leaders' direction)."""
    d = dataset.d
    means = _means(seqs)
    for lam in small_rationals():
        shifted = [[add(x, scale(lam, mu)) for x in s] for s, mu in zip(seqs, means)]
        if len({x for s in shifted for x in s}) == sum(len(s) for s in shifted):
            break
    spread = max(norm1(x) for s in shifted for x in s)
    kappa = ONE
    while kappa * spread > RADIUS:
        kappa /= 2
    e1 = unit(d, 0)
    z0 = scale(ONE / (1 + lam), e1)
    ff = FF(kappa, (tuple(ZERO for _ in range(d)),), (ONE,), tuple((z,) for z in z0))
    sa = SA(ONE, LowRank(ZERO), LowRank(lam))
    after = [[add(scale(kappa, x), e1) for x in s] for s in shifted]
    values = [x for s in after for x in s]
    w = direction(values, d)
    keys = sorted(dot(w, x) for x in values)
    gap = min_gap(keys)
    claims = ({"kind": "uniform_attention", "block": block},
              {"kind": "separation", "block": block, "direction": [str(v) for v in w], "min_gap": None if gap is None else str(gap)})
    return Phase("separation", (block, block + 1), (Block(ff, sa),), claims), after, w
