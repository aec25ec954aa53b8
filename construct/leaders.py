"""Phase 2, leaders: m_j leaders per sequence, each moved by one flat-topped
hat onto a circle of radius R, where the collapse tells them apart.

After the separation every token is (t, 1, 0, …). The circle lies in the
plane of the "up" coordinate 2 (the anchor, 1 for every other token) and a
"side" coordinate: 3 when d ≥ 3 — the leader keeps its t — and 1 when d = 2.
A leader at angle θ sits at up = R cos θ, side = R sin θ, with
(cos θ, sin θ) = ((1−τ²)/(1+τ²), 2τ/(1+τ²)) exact for rational τ; its code
is the side value R sin θ, which the collapse copies.

* The P leader of a sequence (its largest t) gets τ ∈ (1/16, 1/8), the
  others τ ∈ (1/4, 1/2), interleaved across sequences so the leaders of one
  sequence are far apart in angle. All angles lie in (0°, 54°): every code
  is positive and distinct.
* Placed leaders are *off* for every later hat, in exact and in float runs:
  with the sequences in disjoint intervals (hardmax, d ≥ 3; see
  separation.offset) a leader's hat also drops its t below every token and
  the hats act on t alone — one coordinate, so a float run computes each
  pre-activation exactly (Sterbenz); otherwise the hats act on g·x with
  g = e_t − β·e_up, where an unplaced token projects to t − β and a placed
  leader (up ≥ 0.6R) far below every later window.
* Hats run in decreasing t: a window never has a placed leader on its right.
  With disjoint intervals nothing else is either: a sequence's other tokens
  are sent below every token (one ReLU unit) once its leaders are placed.
* R is the least power of two that keeps codes ≥ 1 apart (the snaps'
  plateaus), every code above every target's coordinate 2 plus 3/2, and the
  collapse's margins (R ≥ 16·m_max² + 64).
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from flint import fmpq

from tfcert.construct.hats import Hat, Projections, dyadic_near, hat_blocks, identity_sa, min_gap
from tfcert.verify.formats import FF, Block, Dataset
from tfcert.verify.numbers import Vec, dot, sub

ONE, ZERO = fmpq(1), fmpq(0)
UP = 1  # the anchor coordinate: 1 for every token after the separation


def side(d: int) -> int:
    """The coordinate a leader's code is read from."""
    return 2 if d >= 3 else 0


@dataclass(frozen=True)
class Leader:
    sequence: int  # file index
    token: int
    output: int  # the index of its target in the pair's output list
    point: Vec  # where it goes

    def code(self, d: int) -> fmpq:
        return self.point[side(d)]


def circle_point(start: Vec, tau: fmpq, radius: fmpq) -> Vec:
    """``start`` with its up and side coordinates moved to angle 2·atan(τ)."""
    d = len(start)
    point = list(start)
    point[UP] = radius * (1 - tau * tau) / (1 + tau * tau)
    point[side(d)] = radius * 2 * tau / (1 + tau * tau)
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


def choose_radius(dataset: Dataset, taus: list[fmpq]) -> fmpq:
    reach = max(abs(y[UP]) for p in dataset.pairs for y in p.output) + fmpq(3, 2)
    m_max = max(len(p.output) for p in dataset.pairs)
    radius = fmpq(64)
    while radius < 16 * m_max * m_max + 64:
        radius *= 2
    while True:
        codes = sorted(radius * 2 * t / (1 + t * t) for t in taus)
        if codes[0] > reach and (min_gap(codes) or ONE) >= 1:
            return radius
        radius *= 2


def choose_beta(unplaced: list[Vec], placed: list[Vec], d: int) -> fmpq:
    """The least power of two β ≥ 1/64 that puts every placed leader's g·x
    at least 1/64 below every unplaced token's."""
    beta = fmpq(1, 64)
    while True:
        g = direction_of(beta, d)
        if max(dot(g, x) for x in placed) + fmpq(1, 64) < min(dot(g, x) for x in unplaced):
            return beta
        beta *= 2


def direction_of(beta: fmpq, d: int) -> Vec:
    return tuple(ONE if i == 0 else -beta if i == UP else ZERO for i in range(d))


def kill_block(index: Projections, refs: list[tuple[int, int]], top: fmpq, floor: fmpq, d: int, g: Vec):
    """An FF of two units, (K/h)·(σ(g·x − θ) − σ(g·x − θ − h)), subtracted
    from t: the tokens ``refs`` — the only ones with g·x > θ, all at least
    θ + 2h, above ``top`` — all move down by the same K, below ``floor`` − 1,
    out of reach of every later hat. The drop is flat on them (both units
    on, their slopes cancel), so a float run moves each by K up to rounding
    and its error in t passes through unmagnified. θ and h are dyadic.
    Returns (block, their new g·x)."""
    values = [index.value[r] for r in refs]
    low = min(values)
    step = fmpq(1)
    while step > (low - top) / 8:
        step /= 2
    theta = dyadic_near((low + top) / 2, step)  # top < θ ≤ (low + top)/2: θ + 2h ≤ low
    h = step
    drop = max(values) - floor + 1
    W = tuple((-drop / h, drop / h) if i == 0 else (ZERO, ZERO) for i in range(d))
    ff = FF(ONE, (g, g), (-theta, -theta - h), W)
    return Block(ff, identity_sa()), {r: v - drop for r, v in zip(refs, values)}


def leader_phase(dataset: Dataset, seqs: list[list[Vec]], first_block: int, per_layer: int, kill: bool):
    """Returns (blocks, claims, leaders, tokens after the phase).

    With ``kill`` (the sequences lie in disjoint intervals of t, see
    separation.offset; d ≥ 3) the sequences are taken from the top interval
    down: its leaders' hats, then one block sending its other tokens below
    everything — so no hat ever has a token above its window but placed
    leaders, which are off. Otherwise the hats run in decreasing t across
    all sequences."""
    d = dataset.d
    picks = choose(dataset, seqs)
    radius = choose_radius(dataset, [tau for *_, tau in picks])
    leaders = [Leader(dataset.pairs[j].index, i, r, circle_point(seqs[j][i], tau, radius)) for j, i, r, tau in picks]
    if kill:  # a placed leader also drops below every token, so g = e_t: one coordinate, exact in floats
        floor = min(x[0] for s in seqs for x in s) - 1
        leaders = [Leader(l.sequence, l.token, l.output, (floor,) + l.point[1:]) for l in leaders]
        g = direction_of(ZERO, d)
    else:
        g = direction_of(choose_beta([x for s in seqs for x in s], [l.point for l in leaders], d), d)
    position = {p.index: j for j, p in enumerate(dataset.pairs)}
    index = Projections({(p.index, i): dot(g, x) for p, s in zip(dataset.pairs, seqs) for i, x in enumerate(s)})
    keys = sorted(x[0] for s in seqs for x in s)

    def hat(leader: Leader) -> Hat:
        source = seqs[position[leader.sequence]][leader.token]
        k = bisect_left(keys, source[0])
        gap = min(min_gap(keys[max(k - 1, 0):k + 2]) or ONE, ONE)  # ≤ 1: windows stay clear of placed leaders
        eps = fmpq(1, 16)
        while eps > gap / 16:
            eps /= 2
        # the widest plateau that keeps half the gap to each neighbour: a float run's error in t
        # (the interval layer's λ magnifies it) may reach almost 0.36·gap
        flat = fmpq(int(((gap / 2 - eps - eps / 8) / eps).floor())) * eps
        return Hat(g, dyadic_near(dot(g, source), eps / 8), eps, sub(leader.point, source),
                   ((leader.sequence, leader.token),), leader.point, flat=flat)

    def t_of(leader: Leader) -> fmpq:
        return seqs[position[leader.sequence]][leader.token][0]

    ordered = sorted(leaders, key=t_of, reverse=True)
    if not kill:
        blocks, claims = hat_blocks([hat(l) for l in ordered], per_layer, d, first_block, index)
    else:
        blocks, claims = [], []
        tops = [max(x[0] for x in s) for s in seqs]  # g = e_t: g·x = t for unplaced tokens
        floor_t = min(x[0] for s in seqs for x in s)
        by_seq = sorted(range(len(seqs)), key=tops.__getitem__, reverse=True)
        chosen = {(l.sequence, l.token) for l in leaders}
        for n, j in enumerate(by_seq):
            mine = [hat(l) for l in ordered if position[l.sequence] == j]
            new_blocks, new_claims = hat_blocks(mine, per_layer, d, first_block + len(blocks), index)
            blocks += new_blocks
            claims += new_claims
            rest = [(dataset.pairs[j].index, i) for i in range(len(seqs[j])) if (dataset.pairs[j].index, i) not in chosen]
            if rest and n + 1 < len(by_seq):  # the intervals below: the next one's top, everything's floor
                block, moved = kill_block(index, rest, tops[by_seq[n + 1]], floor_t, d, g)
                blocks.append(block)
                for ref, v in moved.items():
                    index.move(ref, v)
    after = [list(s) for s in seqs]
    for leader in leaders:
        after[position[leader.sequence]][leader.token] = leader.point
    if kill:
        placed = {(l.sequence, l.token) for l in leaders}
        for (seq, i), v in index.value.items():
            j = position[seq]
            if (seq, i) not in placed and v != dot(g, seqs[j][i]):
                after[j][i] = (seqs[j][i][0] + v - dot(g, seqs[j][i]),) + seqs[j][i][1:]
    return blocks, claims, leaders, after
