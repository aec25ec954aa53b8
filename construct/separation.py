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
from itertools import combinations, count, islice

import numpy as np
from flint import fmpq

from tfcert.construct.hats import Hat, Projections, dense, direction, hat_blocks, min_gap, sparse
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
    an anchor. The SA (A = 0: the exact mean, for every τ too) adds λ·t̄_j
    (λ = 0 where no token is shared: V is then 0 and a float run's SA exact).
    After it every t is distinct. w and λ are chosen together (_conditioned)."""
    d, seqs, block = dataset.d, before.tokens, before.span[1]
    means = _means(seqs)
    w, (alpha, beta), lam = _conditioned(seqs, means, [len(p.output) for p in dataset.pairs], d)
    e_t, e_y = unit(d, 0), unit(d, 1)
    ff = FF(ZERO, (scale(alpha, w), tuple(ZERO for _ in range(d))), (beta, ONE),
            tuple((a, b) for a, b in zip(e_t, e_y)))
    ts = [[alpha * dot(w, x) + beta for x in s] for s in seqs]
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


def _scaling(projections: list[fmpq]) -> tuple[fmpq, fmpq]:
    """α (a power of two, exact in floats) and β with α·w·x + β ∈ [1/64, 1/32]:
    every later breakpoint lies within a factor 2 of every t, so the hats'
    pre-activations t − breakpoint are exact in floats (Sterbenz)."""
    lo, hi = min(projections), max(projections)
    alpha = ONE
    while alpha * (hi - lo) > fmpq(1, 64):
        alpha /= 2
    return alpha, fmpq(1, 64) - alpha * lo


def _distinct(keys: list[fmpq]) -> bool:
    keys = sorted(keys)  # sorted, not hashed: rational hashing is slow
    return all(a != b for a, b in zip(keys, keys[1:]))


def _conditioned(seqs, means: list[Vec], leaders: list[int], d: int) -> tuple[Vec, tuple[fmpq, fmpq], fmpq]:
    """w, (α, β) and λ of the separation block: among the dense candidates,
    the coordinate axes and sparse directions (hats.sparse) and λ = 0 or one
    of the first SHIFTS small rationals, the pair a float run keeps apart
    best (_ranking, in float64), the first that checks exactly: w gives
    distinct tokens and distinct means distinct projections, and the shifted
    values t + λ·t̄_j are pairwise distinct. Where float64 ranks none (values
    beyond its range, or every candidate colliding), direction() and the
    first λ that separates."""
    tokens = [x for s in seqs for x in s]
    values = distinct_sorted(tokens + means)
    candidates, lams = dense(d) + sparse(d), [ZERO, *islice(small_rationals(), SHIFTS)]
    tried: dict[int, tuple | None] = {}

    def shifted(i: int, lam: fmpq) -> tuple[fmpq, fmpq] | None:
        """(α, β) when candidate i with λ separates everything exactly, else None."""
        if i not in tried:
            w = candidates[i]
            ok = any(w) and _distinct([dot(w, x) for x in values])
            tried[i] = None if not ok else (_scaling([dot(w, x) for x in tokens]),
                                            [[dot(w, x) for x in s] for s in seqs])
        if tried[i] is None:
            return None
        (alpha, beta), projections = tried[i]
        ts = [[alpha * p + beta for p in row] for row in projections]
        keys = [t + lam * sum(row, ZERO) / len(row) for row in ts for t in row]
        return (alpha, beta) if _distinct(keys) else None

    for i, j in _ranking(seqs, means, leaders, candidates, lams, d):
        if (scaling := shifted(i, lams[j])) is not None:
            return candidates[i], scaling, lams[j]
    w = direction(values, d)
    candidates.append(w)
    for lam in small_rationals():  # measure-zero failures aside, one of the first few
        if (scaling := shifted(len(candidates) - 1, lam)) is not None:
            return w, scaling, lam
    raise AssertionError("unreachable")


# The float error a run may add, relative to what the later phases tolerate, in units of u (a
# ranking: the same in every format). A leader hat's plateau is ≈ 0.43 × the gap around its
# leader and its window's edge ≈ 0.5 × that gap from the neighbours: their errors in t must stay
# below it (PLATEAU). A token above a hat's window is dropped with all four units on: their
# slopes |δ|/ε ≤ 4/ε cancel, but a float run rounds each product, γ_5·4·4·Δ/ε for a token Δ
# above the window; the collapse's argmax gaps between one sequence's leaders (≈ 0.02, the
# leaders' angles) tolerate errors of about 1e-3 there (DROP).
PLATEAU = 2.5
DROP = 5 * 4 * 4 / 1e-3


def _ranking(seqs, means: list[Vec], leaders: list[int], candidates: list[Vec], lams: list[fmpq],
             d: int) -> list[tuple[int, int]]:
    """(candidate, λ) index pairs that float64 tells apart, best first: by
    the largest predicted error of the leader phase relative to what it
    tolerates (_badness). Keys are rounded to 1/32 of a binary order of
    magnitude, so that the order does not hang on float64 noise, ties going
    to the earlier candidate, then the earlier λ."""
    try:
        X = np.array([[float(v) for v in x] for s in seqs for x in s], dtype=np.float64).reshape(-1, d)
        M = np.array([[float(v) for v in mu] for mu in means], dtype=np.float64).reshape(-1, d)
        W = np.array([[float(v) for v in w] for w in candidates], dtype=np.float64).T
    except OverflowError:
        return []
    keys = []
    with np.errstate(all="ignore"):
        # first the candidates that tell the distinct tokens and means apart
        keep = np.flatnonzero((np.diff(np.sort(np.unique(np.vstack([X, M]), axis=0) @ W, axis=0), axis=0) > 0).all(axis=0))
        W = W[:, keep]
        seq = np.repeat(np.arange(len(seqs)), [len(s) for s in seqs])
        count = np.bincount(seq).astype(np.float64)

        def per_sequence(values):  # each token's sequence mean of ``values``
            return (np.add.reduceat(values, np.r_[0, np.cumsum(count[:-1])].astype(int), axis=0) / count[:, None])[seq]

        P = X @ W
        spread = P.max(axis=0) - P.min(axis=0)
        alpha = np.minimum(1.0, 2.0 ** np.floor(-np.log2(64 * np.where(spread > 0, spread, 1.0))))  # _scaling's
        beta = 1 / 64 - alpha * P.min(axis=0)
        t = alpha * P + beta
        inexact = (X.astype(np.float32).astype(np.float64) != X).astype(np.float64)
        E_ff = ((np.count_nonzero(W, axis=0) + 1) * (alpha * (np.abs(X) @ np.abs(W)) + np.abs(beta))
                + alpha * ((np.abs(X) * inexact) @ np.abs(W)) + np.abs(beta))
        lead = np.zeros(P.shape, dtype=bool)
        for start, s, m in zip(np.r_[0, np.cumsum([len(s) for s in seqs])], seqs, leaders):
            top = np.argsort(-P[start:start + len(s)], axis=0, kind="stable")[:m]  # the m_j largest t
            np.put_along_axis(lead[start:start + len(s)], top, True, axis=0)
        tbar, Ebar = per_sequence(t), per_sequence(E_ff)
        for j, lam in enumerate(map(float, lams)):
            E = E_ff if lam == 0 else E_ff + lam * (Ebar + (count[seq, None] + 2) * tbar) + (d + 4) * (t + lam * tbar)
            bad = _badness(t + lam * tbar, lead, E)
            keys += [(np.round(np.log2(np.maximum(b, 2.0 ** -1000)) * 32), int(i), j) for i, b in zip(keep, bad)
                     if np.isfinite(b)]
    return [(i, j) for _, i, j in sorted(keys)]


def _badness(s: np.ndarray, lead: np.ndarray, E: np.ndarray) -> np.ndarray:
    """Per column (a candidate): the largest predicted error over the leader
    hats relative to what they tolerate (in units of u; inf where two values
    of ``s`` coincide), from every token's shifted value ``s``, whether it
    is a leader, and its error in t ``E`` (units of u): the FF's
    (k+1)·(α·Σ_k|w_k x_ik| + |β|) for a k-term dot product plus the input's
    and β's rounding, and where λ ≠ 0 the SA's (the mean's, and V's, a
    d-term product in the float run's dense form: (d+4)·(|t_i| + λ|t̄_j|))."""
    n, C = s.shape
    if n < 2:
        return np.zeros(C)
    order = np.argsort(s, axis=0)  # ties make the pair collide (inf) whatever their order
    ss, ls, Es = (np.take_along_axis(a, order, axis=0) for a in (s, lead, E))
    g = np.diff(ss, axis=0)
    inf, zero = np.full((1, C), np.inf), np.zeros((1, C))
    gap = np.minimum(np.vstack([inf, g]), np.vstack([g, inf]))
    near = np.maximum(np.vstack([zero, Es[:-1]]), np.vstack([Es[1:], zero]))
    plateau = PLATEAU * (Es + near) / gap
    # what each leader's hat drops: the tokens up to the next leader above (later hats run below)
    rows = np.arange(n)[:, None]
    above = np.minimum.accumulate(np.where(ls, rows, n)[::-1], axis=0)[::-1]
    nxt = np.vstack([above[1:], np.full((1, C), n)])
    top = np.take_along_axis(ss, np.maximum(nxt - 1, rows), axis=0)
    eps = np.minimum(1 / 16, 2.0 ** np.floor(np.log2(np.minimum(gap, 1.0) / 16)))  # leaders.py's ε
    bad = np.where(ls, np.maximum(plateau, DROP * (top - ss) / eps), 0.0).max(axis=0)
    return np.where((g > 0).all(axis=0) & np.isfinite(bad), bad, np.inf)
