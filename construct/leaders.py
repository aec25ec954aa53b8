"""Phase 2, leaders: m_j leaders per sequence, each moved by one hat to an
exact rational point on the circle of radius R.

Leader 0 of sequence j (the "region P" leader) goes to R·u(t_j) with
u(t) = ((1−t²)/(1+t²), 2t/(1+t²), 0, …), t_j ∈ (0, 1/4); the other leaders go
to R·v(t) = R·(−(1−t²)/(1+t²), 2t/(1+t²), 0, …), t ∈ (1/4, 3/4), all t
distinct. A leader's code is its second coordinate R·2t/(1+t²); codes are
distinct because 2t/(1+t²) increases on (0, 1). Leaders are the first m_j
tokens of each input sequence, in file order.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from flint import fmpq

from tfcert.construct.hats import Hat, hat_blocks, min_gap
from tfcert.verify.formats import Dataset
from tfcert.verify.numbers import Vec, dot, sub

ONE, ZERO = fmpq(1), fmpq(0)


@dataclass(frozen=True)
class Leader:
    sequence: int  # file index
    token: int
    point: Vec  # where the leader goes

    @property
    def code(self) -> fmpq:
        return self.point[1]


def circle(t: fmpq, radius: fmpq, d: int, second_orthant: bool) -> Vec:
    x = (1 - t * t) / (1 + t * t)
    y = 2 * t / (1 + t * t)
    return (radius * (-x if second_orthant else x), radius * y) + tuple(ZERO for _ in range(d - 2))


def placements(dataset: Dataset, radius: fmpq) -> list[Leader]:
    n = len(dataset.pairs)
    q_total = dataset.total_outputs - n
    leaders, q = [], 0
    for j, pair in enumerate(dataset.pairs):
        leaders.append(Leader(pair.index, 0, circle(fmpq(j + 1, 4 * (n + 1)), radius, dataset.d, False)))
        for r in range(1, len(pair.output)):
            q += 1
            t = fmpq(1, 4) + fmpq(q, 2 * (q_total + 1))
            leaders.append(Leader(pair.index, r, circle(t, radius, dataset.d, True)))
    return leaders


def choose_radius(dataset: Dataset, w: Vec, windows: list[tuple[fmpq, fmpq]]) -> fmpq:
    """The least power of two R ≥ 4 such that every code exceeds max|y_1| + 1
    (targets stay clear of interpolation windows) and every placed leader
    projects outside every leader window (the windows are disjoint: one
    binary search each)."""
    reach = max(abs(y[0]) for p in dataset.pairs for y in p.output) + 1
    windows = sorted(windows)
    lows = [lo for lo, _ in windows]

    def clear(t: fmpq) -> bool:
        k = bisect_left(lows, t) - 1
        return k < 0 or t >= windows[k][1]

    radius = fmpq(4)
    while True:
        leaders = placements(dataset, radius)
        if min(l.code for l in leaders) > reach and all(clear(dot(w, l.point)) for l in leaders):
            return radius
        radius *= 2


def leader_phase(dataset: Dataset, seqs: list[list[Vec]], w: Vec, first_block: int, per_layer: int):
    """Returns (blocks, claims, leaders, tokens after the phase)."""
    projections = {(p.index, i): dot(w, x) for p, s in zip(dataset.pairs, seqs) for i, x in enumerate(s)}
    eps = (min_gap(sorted(projections.values())) or ONE) / 2
    windows = [(projections[(p.index, r)] - eps, projections[(p.index, r)] + eps)
               for p in dataset.pairs for r in range(len(p.output))]
    radius = choose_radius(dataset, w, windows)
    leaders = placements(dataset, radius)
    position = {p.index: j for j, p in enumerate(dataset.pairs)}
    hats = []
    for leader in leaders:
        source = seqs[position[leader.sequence]][leader.token]
        hats.append(Hat(w, dot(w, source), eps, sub(leader.point, source),
                        ((leader.sequence, leader.token),), leader.point))
    blocks, claims = hat_blocks(hats, per_layer, dataset.d, first_block, projections)
    after = [list(s) for s in seqs]
    for leader in leaders:
        after[position[leader.sequence]][leader.token] = leader.point
    return blocks, claims, leaders, after
