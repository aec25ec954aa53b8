"""Phase 2, leaders: m_j leaders per sequence, each moved by one flat-topped
hat onto a circle of radius 4, where the collapse tells them apart.

After the separation every token is (t, 1, 0, …). The circle lies in the
plane of the "up" coordinate 2 (the anchor, 1 for every other token) and a
"side" coordinate: 3 when d ≥ 3 — the leader keeps its t — and 1 when d = 2,
where the circle is mirrored to negative side values. A leader at angle θ
sits at up = 4 cos θ, side = ±4 sin θ, with (cos θ, sin θ) =
((1−τ²)/(1+τ²), 2τ/(1+τ²)) exact for rational τ; its code is the side value
times the collapse's gain R/4 (a power of two), which the collapse copies.

* The P leader of a sequence (its largest t) gets τ ∈ (1/16, 1/8), the
  others τ ∈ (1/4, 1/2), interleaved across sequences so the leaders of one
  sequence are far apart in angle. All angles lie in (0°, 54°): every code
  is positive and distinct.
* The hats act on t alone — one coordinate, so a float run computes each
  pre-activation exactly (Sterbenz) — and placed leaders are *off* for
  every later hat, in exact and in float runs: a leader's hat also drops
  its t below every token (d = 2: t is the circle's side coordinate, < 0).
* Hats run in decreasing t: a window never has a placed leader on its right,
  and each hat also drops every token past its window below every later
  window (the hat claim's ``above``), so nothing else is there either.
* R is the least power of two ≥ 4 that keeps codes ≥ 1 apart (the snaps'
  plateaus) and every code above every target's coordinate 2 plus 3/2; the
  circle stays at radius 4 so the collapse's scores stay small next to
  their gaps, and the codes' size goes into V, exact in floats.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from flint import fmpq

from tfcert.construct.hats import Hat, Projections, flat_hat, hat_blocks, min_gap
from tfcert.construct.phase import Phase, frozen
from tfcert.verify.formats import SA, Dataset, LowRank
from tfcert.verify.numbers import ONE, ZERO, Vec, dot, scale, sub, unit

UP = 1  # the anchor coordinate: 1 for every token after the separation


def side(d: int) -> int:
    """The coordinate a leader's code is read from."""
    return 2 if d >= 3 else 0


def side_sign(d: int) -> fmpq:
    """−1 when d = 2, where the side coordinate is t's: the circle is mirrored to negative side
    values, below every t; else 1."""
    return -ONE if d == 2 else ONE


@dataclass(frozen=True)
class Leader:
    sequence: int  # file index
    token: int
    output: int  # the index of its target in the pair's output list
    point: Vec  # where it goes
    gain: fmpq  # the collapse's V scales the side value by this (a power of two: exact in floats)

    def code(self, d: int) -> fmpq:
        return self.gain * side_sign(d) * self.point[side(d)]


def collapse_sa(d: int, gain: fmpq) -> SA:
    """The collapse (collapse.py), the SA of the phase's last block: ρ = 0,
    A = the identity on the circle's plane, and V copies the side value times
    ``gain`` (a power of two) into up, negated when d = 2 (the mirrored
    circle) so every code is positive: exact products in floats too."""
    up, sd = unit(d, UP), unit(d, side(d))
    A = LowRank(ONE) if d == 2 else LowRank(ZERO, ((up, up), (sd, sd)))
    return SA(ZERO, A, LowRank(ZERO, ((up, scale(gain * side_sign(d), sd)),)))


def circle_point(start: Vec, tau: fmpq, radius: fmpq) -> Vec:
    """``start`` with its up and side coordinates moved to angle 2·atan(τ)
    (mirrored to negative side values when d = 2, where the side coordinate
    is t's: a placed leader then lies far below every later hat's window)."""
    d = len(start)
    point = list(start)
    point[UP] = radius * (1 - tau * tau) / (1 + tau * tau)
    point[side(d)] = side_sign(d) * radius * 2 * tau / (1 + tau * tau)
    return tuple(point)


def choose(dataset: Dataset, seqs: list[list[Vec]]) -> list[tuple[int, int, int, fmpq]]:
    """(position, token, output, τ) for every leader: the m_j largest t of each
    sequence, the largest the P leader."""
    n = len(dataset.pairs)
    others = (max(len(p.output) for p in dataset.pairs) - 1) * n
    out = []
    for j, (pair, seq) in enumerate(zip(dataset.pairs, seqs)):
        order = sorted(range(len(seq)), key=lambda i: seq[i][0], reverse=True)
        out.append((j, order[0], 0, fmpq(1, 16) + fmpq(j + 1, 16 * (n + 1))))
        for r in range(1, len(pair.output)):
            q = (r - 1) * n + j
            out.append((j, order[r], r, fmpq(1, 4) + fmpq(q + 1, 4 * (others + 1))))
    return out


CIRCLE = fmpq(4)  # the leaders' circle: radius 4 beats every non-leader's score (≤ 1.4) by a wide margin


def choose_radius(dataset: Dataset, taus: list[fmpq]) -> fmpq:
    """The least power of two R ≥ CIRCLE with codes R·sin θ ≥ 1 apart and
    above every target's coordinate 2 plus 3/2. The leaders sit on the
    circle of radius CIRCLE and the collapse scales their side values by
    R/CIRCLE: a hat's slopes, and the rounding of every token that passes
    under a hat, grow with the circle, not with the codes."""
    reach = max(y[UP] for p in dataset.pairs for y in p.output) + fmpq(3, 2)
    radius = CIRCLE
    while True:
        codes = sorted(radius * 2 * t / (1 + t * t) for t in taus)
        if codes[0] > reach and (min_gap(codes) or ONE) >= 1:
            return radius
        radius *= 2


def leader_phase(dataset: Dataset, before: Phase, per_layer: int) -> Phase:
    """The leader hats' blocks, the last one's attention the collapse
    (collapse_sa), their claims, the leaders and the tokens after them.

    The hats run in decreasing t across all sequences. With one hat per
    layer each also drops every token past its window by K (``above``), below
    every later window: no hat's units are on for a token but its own and
    those it drops, once, with slopes that cancel exactly — so no token's
    float error is magnified by more than one cancellation."""
    d, seqs, first_block = dataset.d, before.tokens, before.span[1]
    picks = choose(dataset, seqs)
    gain = choose_radius(dataset, [tau for *_, tau in picks]) / CIRCLE
    leaders = [Leader(dataset.pairs[j].index, i, r, circle_point(seqs[j][i], tau, CIRCLE), gain)
               for j, i, r, tau in picks]
    if d >= 3:  # a placed leader also drops below every token (d = 2: its t is the circle's side, < 0)
        floor = min(x[0] for s in seqs for x in s) - 1
        leaders = [Leader(l.sequence, l.token, l.output, (floor,) + l.point[1:], gain) for l in leaders]
    g = unit(d, 0)  # the hats act on t alone: one coordinate, each pre-activation exact in floats (Sterbenz)
    position = {p.index: j for j, p in enumerate(dataset.pairs)}
    index = Projections({(p.index, i): dot(g, x) for p, s in zip(dataset.pairs, seqs) for i, x in enumerate(s)})
    keys = sorted(x[0] for s in seqs for x in s)

    # A hat's window may have tokens of other sequences above it: each hat also drops them by K in
    # t, below every later window, so no hat cancels on a token that an earlier hat has cancelled
    # on (for d = 2 the dropped t stay above −K: the collapse's scores still favour each token's
    # P leader). Hats sharing a layer (width > 4) drop nothing.
    spread = keys[-1] - keys[0]
    big = fmpq(1, 64)
    while big < spread + fmpq(1, 64):
        big *= 2
    drop = tuple(-big if i == 0 else ZERO for i in range(d)) if per_layer == 1 else None

    def hat(leader: Leader) -> Hat:
        source = seqs[position[leader.sequence]][leader.token]
        k = bisect_left(keys, source[0])
        gap = min(min_gap(keys[max(k - 1, 0):k + 2]) or ONE, ONE)  # ≤ 1: windows stay clear of placed leaders
        return flat_hat(g, source, gap, sub(leader.point, source), ((leader.sequence, leader.token),),
                        leader.point, above=drop)

    def t_of(leader: Leader) -> fmpq:
        return seqs[position[leader.sequence]][leader.token][0]

    ordered = sorted(leaders, key=t_of, reverse=True)
    blocks, claims = hat_blocks([hat(l) for l in ordered], per_layer, d, first_block, index, collapse_sa(d, gain))
    after = [list(s) for s in seqs]
    for leader in leaders:
        after[position[leader.sequence]][leader.token] = leader.point
    if drop is not None:
        placed = {(l.sequence, l.token) for l in leaders}
        for (seq, i), v in index.value.items():
            j = position[seq]
            if (seq, i) not in placed and v != dot(g, seqs[j][i]):
                after[j][i] = (seqs[j][i][0] + v - dot(g, seqs[j][i]),) + seqs[j][i][1:]
    return Phase("leaders", (first_block, first_block + len(blocks)), tuple(blocks), tuple(claims), frozen(after),
                 tuple(leaders))
