"""Phase 1, separation: make every token of the whole dataset distinct.

One block: the FF projects every token to a scalar t on a direction where
distinct tokens and distinct means project apart, and the SA with A = 0 adds
λ times the sequence's mean t̄_j. Shifted values t + λt̄_j collide only for
finitely many λ — unless two sequences share a token and have equal means.
Those are first told apart by "bumps": a hat moving one token value c (in one
sequence, not the other) by a small δ. Each bump splits a class of equal
means without merging any two others, so at most N − 1 are needed.
"""
from __future__ import annotations

from collections import defaultdict
from itertools import chain, combinations, count, islice

import numpy as np
from flint import fmpq

from tfcert.construct.hats import Hat, Projections, direction, hat_blocks, min_gap
from tfcert.construct.phase import Phase, frozen
from tfcert.verify.layers import mean
from tfcert.verify.shortcuts import distinct_sorted
from tfcert.verify.formats import FF, SA, Block, Dataset, LowRank
from tfcert.verify.numbers import ONE, ZERO, Vec, add, dot, scale, unit


def small_rationals():
    """1, 1/2, 2, 1/3, 3, 2/3, 3/2, …: candidates with small denominators first."""
    for total in count(2):
        for q in range(1, total):
            p = total - q
            if fmpq(p, q).p == p:  # in lowest terms
                yield fmpq(p, q)


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


def bumps(dataset: Dataset, per_layer: int) -> Phase:
    """The tie-break blocks, from the dataset's inputs."""
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
                                            len(blocks), Projections(projections))
        blocks += new_blocks
        claims += new_claims
        seqs = [[add(x, delta) if x == c else x for x in s] for s in seqs]
    return Phase("bump", (0, len(blocks)), tuple(blocks), tuple(claims), frozen(seqs))


def separation(dataset: Dataset, before: Phase) -> Phase:
    """The projection + mean-shift block. The FF (η = 0) maps every token to
    (t, 1, 0, …) with t = α·w·x + β ∈ [1/64, 1/32]: one scalar per token, on
    a direction w where distinct tokens and distinct sequence means project
    apart, and the constant 1 in coordinate 2 that the later phases use as
    an anchor. The SA (A = 0: the exact mean, for every τ too) adds λ·t̄_j.
    After it every t is distinct."""
    d, seqs, block = dataset.d, before.tokens, before.span[1]
    means = _means(seqs)
    w = direction(distinct_sorted([x for s in seqs for x in s] + means), d)
    values = [dot(w, x) for s in seqs for x in s]
    lo, hi = min(values), max(values)
    alpha = ONE
    while alpha * (hi - lo) > fmpq(1, 64):
        alpha /= 2
    beta = fmpq(1, 64) - alpha * lo
    e_t, e_y = unit(d, 0), unit(d, 1)
    ff = FF(ZERO, (scale(alpha, w), tuple(ZERO for _ in range(d))), (beta, ONE),
            tuple((a, b) for a, b in zip(e_t, e_y)))
    ts = [[alpha * dot(w, x) + beta for x in s] for s in seqs]
    lam = _shift(ts)
    shifts = [lam * sum(row, ZERO) / len(row) for row in ts]  # λ·t̄_j, once per sequence
    shifted = [[t + s for t in row] for row, s in zip(ts, shifts)]
    sa = SA(ONE, LowRank(ZERO), LowRank(ZERO, ((scale(lam, e_t), e_t),)))
    after = [[(t, ONE) + tuple(ZERO for _ in range(d - 2)) for t in row] for row in shifted]
    keys = sorted(t for row in shifted for t in row)
    gap = min_gap(keys)
    claims = ({"kind": "uniform_attention", "block": block},
              {"kind": "separation", "block": block, "direction": [str(v) for v in e_t],
               "min_gap": None if gap is None else str(gap)})
    return Phase("separation", (block, block + 1), (Block(ff, sa),), claims, frozen(after))


SHIFTS = 32


def _shift(ts: list[list[fmpq]]) -> fmpq:
    """λ for t + λ·t̄_j: all shifted values distinct, and among the first
    SHIFTS small rationals the one with the largest least gap relative to the
    spread (ranked in float64, checked exactly), for a float run's sake."""
    means = [sum(row, ZERO) / len(row) for row in ts]
    t = np.array([float(v) for row in ts for v in row])
    tbar = np.array([float(mu) for row, mu in zip(ts, means) for _ in row])

    def score(lam: fmpq) -> float:
        shifted = np.sort(t + float(lam) * tbar)
        gaps = np.diff(shifted)
        return float(gaps.min() / (shifted[-1] - shifted[0])) if len(gaps) else 1.0

    first = list(islice(small_rationals(), SHIFTS))
    for lam in chain(sorted(first, key=score, reverse=True), small_rationals()):
        keys = sorted(v + lam * mu for row, mu in zip(ts, means) for v in row)
        if all(a != b for a, b in zip(keys, keys[1:])):
            return lam
    raise AssertionError("unreachable")
