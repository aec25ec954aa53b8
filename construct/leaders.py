"""Phase 2, leaders: m_j leaders per sequence, each moved by one hat onto a
circle of radius 4, where the collapse tells them apart, and given a code,
which the collapse copies and the snaps read.

After the separation every token is (t, 1, 0, …). The circle lies in the
plane of the "up" coordinate 2 (the anchor, 1 for every other token) and a
"side" coordinate. Its points are rounded to a dyadic grid (placement_grid:
2^-4 for d ≥ 4, 2^-3 for d ≤ 3, where that keeps 3/4 of every collapse
decision's margin, and for d ≤ 3 every code distinct; else finer), so that a
hat writes them, and the collapse reads them, with few significant bits —
exactly, in binary16 too, where its inputs are exact. For d ≥ 4 a hat's
products of a move of six bits with units of five fit binary16's eleven (with
2^-8, ten bits, they rounded, and the slopes magnified it). For d ≤ 3 the side
value is the code, and a code of at most six bits is exact in bfloat16 too: on
the float survey's 120 datasets of d ≤ 3, 2^-3 instead of 2^-8 gave five more
bfloat16 claims within 1e-1 of 1 + max|y| and lost none (2^-2 and 2^-1 lost a
binary16 one; docs/results/leader-grid-d3.txt).

* d ≥ 4: the circle's plane is (up, coordinate 3). A sequence's leaders
  sit on the ring of m_max points at angles 2πr/m_max (ring): the P leader
  (its largest t) at angle 0, the largest up value, which every non-leader
  (up = 1, side = 0) scores highest; the others spread around the whole
  circle, so a leader's own score 16 beats 16·cos(2π/m_max). Every sequence
  uses the same ring, and the code has a coordinate of its own, 4: a placed
  leader holds code/G there for the codes C, C + S, …, C + (Σm − 1)·S
  (choose_codes: G a power of two above every target's coordinate 2 plus
  3/2, S = G/2^b for at most 2^b codes, C the least multiple of S that
  leaves the snaps their support, or G), and the collapse's V = G·e_up e_4ᵀ
  copies it exactly.
  Under softmax, one token to a sequence, the codes G + kS are held 3G
  higher (lifted), which every float run's softmax copies.
* d ≤ 3 has no coordinate to spare: the code is the side value (coordinate 3;
  d = 2: coordinate 1, t itself, the circle mirrored to negative values,
  below every t) times the collapse's gain R/4 (a power of two), so codes
  must differ across every leader of the dataset: the P leader of a
  sequence gets τ ∈ (1/16, 1/8), the others τ ∈ (1/4, 3/4), interleaved
  across sequences so the leaders of one sequence are far apart in angle,
  at angle 2·atan τ, (cos, sin) = ((1−τ²)/(1+τ²), 2τ/(1+τ²)); a sequence's
  leaders 2, 4, … (0 its P leader) at 180° minus that (mirrored).
* A placed leader's t drops below every token (d = 2: the mirrored side).
* The hats act on t alone — one coordinate, so a float run computes each
  pre-activation exactly (Sterbenz) — and run in decreasing t: a window
  never has a placed leader on its right, and each hat also drops every
  token past its window below every later window (the hat claim's
  ``above``), so nothing else is there either.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import mpmath
from flint import fmpq

from tfcert.construct.hats import HALF_TOKENS, Hat, Projections, flat_hat, hat_blocks, min_gap, ordered, tent_hat
from tfcert.construct.phase import Phase, frozen
from tfcert.verify.floats import FORMATS, round_nearest
from tfcert.verify.formats import SA, Dataset, LowRank
from tfcert.verify.numbers import ONE, ZERO, Vec, dot, scale, sub, unit

UP = 1  # the anchor coordinate: 1 for every token after the separation
CIRCLE = fmpq(4)  # the leaders' circle: radius 4 beats every non-leader's score (≤ 1.4) by a wide margin
RING = fmpq(1, 16)  # d ≥ 4: the placement grid at its coarsest, six significant bits on the circle
COARSEST = fmpq(1, 8)  # d ≤ 3: at most six significant bits on the circle, the codes' (see placement_grid)


def side(d: int) -> int:
    """The side coordinate of the circle's plane."""
    return 2 if d >= 3 else 0


def code_axis(d: int) -> int:
    """The coordinate a placed leader keeps its code in: one of its own when d ≥ 4, else the side."""
    return 3 if d >= 4 else side(d)


def code_sign(d: int) -> fmpq:
    """−1 when d = 2, where the side is t's coordinate and the circle mirrored to negative values."""
    return -ONE if d == 2 else ONE


@dataclass(frozen=True)
class Leader:
    sequence: int  # file index
    token: int
    output: int  # the index of its target in the pair's output list
    point: Vec  # where it goes
    gain: fmpq  # the collapse's V scales what it copies by this (a power of two: exact in floats)
    lift: fmpq = ZERO  # what the collapse writes above the code, which the snap phase's first block takes off

    def code(self, d: int) -> fmpq:
        """What coordinate 2 holds, after the lift is taken off, for the tokens that attend to this leader."""
        return self.gain * code_sign(d) * self.point[code_axis(d)] - self.lift


def collapse_sa(d: int, gain: fmpq) -> SA:
    """The collapse (collapse.py), the SA of the phase's last block: ρ = 0,
    A = the identity on the circle's plane (coordinates up and side) and V
    copies the code coordinate times ±gain into up: exact products in floats too."""
    up, sd = unit(d, UP), unit(d, side(d))
    A = LowRank(ONE) if d == 2 else LowRank(ZERO, ((up, up), (sd, sd)))
    return SA(ZERO, A, LowRank(ZERO, ((up, scale(gain * code_sign(d), unit(d, code_axis(d)))),)))


def on_grid(v: fmpq, grid: fmpq) -> fmpq:
    """v rounded towards 0 to a multiple of ``grid``."""
    m = (abs(v) / grid).floor()
    return m * grid if v >= 0 else -m * grid


def choose(dataset: Dataset, seqs) -> list[tuple[int, int, int]]:
    """(position, token, output) for every leader: the m_j largest t of each
    sequence in decreasing order, the first the P leader (output 0)."""
    out = []
    for j, (pair, seq) in enumerate(zip(dataset.pairs, seqs)):
        order = sorted(range(len(seq)), key=lambda i: seq[i][0], reverse=True)
        out += [(j, order[r], r) for r in range(len(pair.output))]
    return out


def coupled_taus(dataset: Dataset) -> list[fmpq]:
    """d ≤ 3: τ per leader, in choose's order (the P leaders in (1/16, 1/8), the others in
    (1/4, 3/4), interleaved across sequences). One sequence's leaders lie n steps apart, and the
    collapse's margin between two of them grows with the square of their angle: (1/4, 1/2)
    gave them about a quarter of it, and 11 fewer half-precision claims within 1e-1 on the float
    survey's datasets of at most 50 tokens (4 of its 140 constructions, 7 of the held-out 146),
    none more."""
    n = len(dataset.pairs)
    others = (max(len(p.output) for p in dataset.pairs) - 1) * n
    out = []
    for j, pair in enumerate(dataset.pairs):
        out.append(fmpq(1, 16) + fmpq(j + 1, 16 * (n + 1)))
        out += [fmpq(1, 4) + fmpq((r - 1) * n + j + 1, 2 * (others + 1)) for r in range(1, len(pair.output))]
    return out


def circle_point(tau: fmpq, grid: fmpq, mirror: bool = False) -> tuple[fmpq, fmpq]:
    """d ≤ 3: (up, side) at angle 2·atan(τ) on the circle of radius 4, on ``grid``; mirrored,
    at 180° minus that angle: up negated, the same side, so the same code."""
    up = on_grid(CIRCLE * (1 - tau * tau) / (1 + tau * tau), grid)
    return (-up if mirror else up), on_grid(CIRCLE * 2 * tau / (1 + tau * tau), grid)


def mirrored(r: int) -> bool:
    """d ≤ 3: whether a sequence's leader r (0: its P leader) sits mirrored, at 180° − 2·atan τ:
    leaders 2, 4, …, so that one sequence's leaders other than its P leader alternate between the
    arcs 28°–74° and 106°–152°, and those on one arc lie twice as many steps of τ apart. The
    codes, the side values, stay those of τ, distinct; every leader but the P leader still has a
    smaller up value, and a mirrored one a negative one. On the float survey's 70
    datasets of at most 50 tokens it gave one half-precision claim within 1e-1 more (softmax seed
    35's binary16), on the held-out 73 nine (the collapse's argmax gaps of seeds 1067, 1123, 1139
    and 1160 had been below their error bounds), on the 49 of d ≤ 3 among seeds 600–999 three,
    and lost none; mirroring the odd ones instead lost two of those 49."""
    return r >= 2 and r % 2 == 0


def ring(m: int, grid: fmpq) -> list[tuple[fmpq, fmpq]]:
    """d ≥ 4: m points (up, side) at angles 2πr/m on the circle of radius 4, on ``grid``
    (mpmath at 80 bits: the same digits on every machine)."""
    with mpmath.workprec(80):
        return [(on_grid(_rational(4 * mpmath.cos(2 * mpmath.pi * r / m)), grid),
                 on_grid(_rational(4 * mpmath.sin(2 * mpmath.pi * r / m)), grid)) for r in range(m)]


def _rational(x) -> fmpq:
    """An mpmath number as the exact dyadic it is."""
    x = mpmath.mpf(x)
    man, exp = x.man_exp  # |x| = man·2^exp
    return (-1 if x < 0 else 1) * fmpq(int(man)) * fmpq(2) ** int(exp)


def _decisions(groups: list[list[tuple[fmpq, fmpq]]]) -> fmpq:
    """The least margin of the collapse's decisions on these groups of points (up, side), one
    group per sequence, the P leader first: each leader's own score over its score with every
    other leader of its group, and the P leader's up value over every other's (what a
    non-leader, at up = 1 and side 0 or about 0, scores)."""
    least = None
    for group in groups:
        for a, (ua, sa_) in enumerate(group):
            own = ua * ua + sa_ * sa_
            for b, (ub, sb) in enumerate(group):
                if a != b:
                    gap = own - ua * ub - sa_ * sb
                    least = gap if least is None else min(least, gap)
        for ub, _ in group[1:]:
            least = min(least, group[0][0] - ub)
    return fmpq(1) if least is None else least


def placement_grid(exact: fmpq, rounded, apart=None, coarsest: fmpq = COARSEST) -> fmpq:
    """The coarsest grid, at most ``coarsest``, on which the rounded points (``rounded(grid)``: their
    groups, as _decisions takes them) keep at least 3/4 of the margin ``exact`` of the points on
    the circle: rounding then changes no decision of the collapse, and a float run keeps most of
    its room. ``apart(points)``, where given, must hold of those rounded points too: d ≤ 3 needs
    every leader's rounded side value, its code, distinct across the whole dataset, and the P
    leaders' τ lie 1/(16(n+1)) apart, so past about 120 sequences 2^-8 merges neighbours
    (distinct_codes)."""
    grid = coarsest
    while _decisions(points := rounded(grid)) < 3 * exact / 4 or (apart is not None and not apart(points)):
        grid /= 2
    return grid


def radii(codes: list[fmpq], top: fmpq) -> tuple[fmpq, fmpq]:
    """(r, R'): R' the largest power of two within half the least gap between
    codes and 1 above ``top``, every target's coordinate 2 (a target left by
    a higher snap must stay off every lower one), r = R'/2: the plateau
    grows with the codes' spacing, and with it the room for their rounding
    (codes above targets of 1e7 are that large, and err as much); powers of
    two keep the breakpoints exact. R'/2 rather than 3R'/4 halves the snaps'
    slopes (R' − r)⁻¹, and with them the rounding of their products, which
    a float bound carries (557 of the float survey's bounds fell, most by
    half, none rose; hardmax seed 54's binary32 bound fell to 0), and puts
    the breakpoints of up to 32
    codes within bfloat16's 8 bits (c ± 3S/8 needs b + 4 of them). Under
    softmax the exact noise has less room: τ* is lower."""
    gap = min_gap(sorted(codes))
    limit = min(gap / 2 if gap is not None else fmpq(1, 2), max(min(codes) - top - 1, fmpq(1, 2)))
    reach = fmpq(1, 2)
    while 2 * reach <= limit:
        reach *= 2
    return reach / 2, reach


def in_bfloat16(values) -> bool:
    """Whether every value is a bfloat16 number (8 significant bits): a snap breakpoint that is
    one is exact in every format (False where one is beyond its range)."""
    try:
        return all(round_nearest(v, FORMATS["bfloat16"]) == v for v in values)
    except OverflowError:
        return False


def snap_points(codes: list[fmpq], radius: fmpq, reach: fmpq) -> list[fmpq]:
    """The snaps' breakpoints c ± radius, c ± reach."""
    return [c + s * v for c in codes for v in (radius, reach) for s in (-1, 1)]


def choose_codes(dataset: Dataset, count: int, softmax: bool = False, lifted_codes: bool = False
                 ) -> tuple[fmpq, fmpq, fmpq]:
    """d ≥ 4: (G, C, S), the codes C, C + S, …, C + (count − 1)·S. G is a power of two above
    every target's coordinate 2 plus 3/2, S = G/2^b with 2^b the least power of two ≥ ``count``,
    and C = G (the codes below 2G) or low: the least multiple of S that leaves the snaps the
    support R' that G would (radii: the largest power of two within S/2 and G − max y − 1). Either
    way the codes lie at least 1 apart, every placed target lies 1 below every snap's window,
    their spacing is as large a fraction of their size as the count allows (a snap's plateau
    grows with it), and each code has at most b + 1 significant bits (C/S ≤ 2^b), so the snaps'
    slopes, about 8·2^b, have few too. Under softmax, whose float run errs on a code relative to
    its size (the normalisation's n + 2 roundings: γ_{n+2} times the code), C is low, as much as
    2^b·S below G: survey seeds 136 and 168 got binary16 claims so; lifted codes (leaders.lifted)
    are G + kS. Under hardmax, where the codes are copies, C is low only where that, unlike G,
    makes every snap breakpoint c ± S/4, c ± S/2 a bfloat16 number: 33 … 64 codes (b = 6) from G
    have 9 bits there, low ones 8 while C/S + count ≤ 64 (survey seed 166). Low codes elsewhere
    would change bounds for nothing: survey seed 2's binary32 bound rose from 1.6e-11 to 5.4e-7
    of 1 + max|y| with them."""
    top = max(y[UP] for p in dataset.pairs for y in p.output)
    bits = (count - 1).bit_length()
    g = fmpq(2 ** max(bits, 1))
    while g <= top + fmpq(3, 2):
        g *= 2
    spacing = g / 2 ** bits
    high = [g + k * spacing for k in range(count)]
    _, reach = radii(high, top)
    first = ((top + 1 + reach) / spacing).ceil() * spacing
    if lifted_codes:
        return g, g, spacing
    if not softmax:
        low = [first + k * spacing for k in range(count)]
        def narrow(codes: list[fmpq]) -> bool:  # every snap breakpoint a bfloat16 number
            return in_bfloat16(snap_points(codes, *radii(codes, top)))
        if narrow(high) or not narrow(low):
            return g, g, spacing
    return g, first, spacing


def choose_radius(dataset: Dataset, sides: list[fmpq]) -> fmpq:
    """d ≤ 3: the least power of two R ≥ CIRCLE with codes R/4·|side| ≥ 1 apart
    and above every target's coordinate 2 plus 3/2. The leaders sit on the
    circle of radius CIRCLE and the collapse scales their side values by
    R/CIRCLE: a hat's slopes, and the rounding of every token that passes
    under a hat, grow with the circle, not with the codes."""
    reach = max(y[UP] for p in dataset.pairs for y in p.output) + fmpq(3, 2)
    radius = CIRCLE
    while True:
        codes = sorted(radius / CIRCLE * abs(v) for v in sides)
        gap = min_gap(codes)  # None: one code; 0 (not "no gap"): two leaders share a side, no R parts them
        if gap == 0:
            raise AssertionError("two leaders share a code")  # a construction bug: place's grid keeps them apart
        if codes[0] > reach and (gap is None or gap >= 1):
            return radius
        radius *= 2


LIFT = 3  # the lift of lifted codes, in units of G


def lifted(dataset: Dataset, before: Phase, attention: str, lowered: bool = False) -> bool:
    """Whether the leaders hold their codes lifted by 3G: under softmax, d ≥ 4 and more than one
    code, where τ* is ``lowered`` (build's share > 0), or where every sequence is one token and
    every t exact in every float run (the separation's ``exact``: the tent hats then write every
    code exactly). A softmax over one token multiplies it by exp(0)/exp(0), rounded, and every
    float run gives back a number of significand at most 5/4 − 2 ulps unchanged (docs/float.md, Limits), while
    the codes' values code/G ∈ [1, 2) mostly lie above it (one code, G, does not). Lifted,
    (code + 3G)/G ∈ [4, 5) has such a significand (b ≤ p − 4 for the format's p), the collapse
    copies it exactly, and the snap phase's first block takes 3G off, exactly (Sterbenz:
    x ∈ [4G, 5G), 3G ≤ x ≤ 6G). At a lowered τ* the other tokens' weights of a longer sequence
    vanish in the float run, as at the largest τ* they do not (the analysis's dominated means):
    survey seeds 19, 67 and 91 got claims of 0 in every format so (bfloat16: none before). Where
    t errs, so may a code, and lifted it would err as much relative to a value 4 times larger,
    and where the weights do not vanish the mean's rounding grows with its magnitude: at the
    largest τ* only one-token sequences with exact t are lifted. At a lowered one build keeps the
    model that proves more (a flat hat's plateau writes a code exactly where t's error stays on
    it): lifting there regardless of t took survey seeds 85 and 139, whose t err, to claims of 0
    in binary64, binary32 and binary16, and changed no other bound."""
    seqs = before.tokens
    return (attention == "softmax" and dataset.d >= 4 and sum(len(p.output) for p in dataset.pairs) > 1
            and (lowered or all(len(s) == 1 for s in seqs) and before.exact))


def place(dataset: Dataset, seqs, picks: list[tuple[int, int, int]], drop: fmpq, softmax: bool = False,
          lifted_codes: bool = False) -> list[Leader]:
    """Every leader's point and the collapse's gain. A placed leader's t moves down by 2·``drop``
    (d ≥ 3), below every token and every later window: a power of two, so that the hat's
    weights on t are small multiples of powers of two and a float run computes its products, on
    the leader and on the tokens it drops, exactly where t is exact (d = 2: t is the mirrored
    side, negative). ``softmax``, ``lifted_codes``: d ≥ 4 codes as choose_codes takes them; lifted
    codes are held LIFT·G higher (lifted)."""
    d = dataset.d
    groups: dict[int, list[int]] = {}
    for j, _, r in picks:
        groups.setdefault(j, []).append(r)
    if d >= 4:  # the ring, the code in coordinate 4
        m, sizes = max(r for *_, r in picks) + 1, sorted({len(g) for g in groups.values()})

        def prefixes(q: fmpq) -> list[list[tuple[fmpq, fmpq]]]:  # a sequence of m_j leaders uses the first m_j
            points = ring(m, q)
            return [points[:k] for k in sizes]

        points = ring(m, placement_grid(_decisions(prefixes(fmpq(1, 2 ** 60))), prefixes, coarsest=RING))
        gain, first, spacing = choose_codes(dataset, len(picks), softmax, lifted_codes)
        above = LIFT * gain if lifted_codes else ZERO
        out = []
        for k, (j, i, r) in enumerate(picks):
            point = list(seqs[j][i])
            point[0] -= 2 * drop
            point[UP], point[side(d)], point[code_axis(d)] = *points[r], (first + k * spacing + above) / gain
            out.append(Leader(dataset.pairs[j].index, i, r, tuple(point), gain, above))
        return out
    taus = coupled_taus(dataset)

    def placed(q: fmpq) -> list[tuple[fmpq, fmpq]]:  # every leader's point, in picks' order
        return [circle_point(tau, q, mirrored(r)) for (_, _, r), tau in zip(picks, taus)]

    def coupled(q: fmpq) -> list[list[tuple[fmpq, fmpq]]]:
        by: dict[int, list] = {}
        for (j, _, _), point in zip(picks, placed(q)):
            by.setdefault(j, []).append(point)
        return list(by.values())

    def distinct_codes(groups: list[list[tuple[fmpq, fmpq]]]) -> bool:  # every leader's point, by sequence
        sides = [sd for group in groups for _, sd in group]  # the code is the side: one side, one snap
        return len(set(sides)) == len(sides)

    grid = placement_grid(_decisions(coupled(fmpq(1, 2 ** 60))), coupled, distinct_codes)
    points = placed(grid)
    gain = choose_radius(dataset, [sd for _, sd in points]) / CIRCLE
    out = []
    for (j, i, r), (up, sd) in zip(picks, points):
        point = list(seqs[j][i])
        if d >= 3:
            point[0] -= 2 * drop
        point[UP], point[side(d)] = up, code_sign(d) * sd
        out.append(Leader(dataset.pairs[j].index, i, r, tuple(point), gain))
    return out


def leader_phase(dataset: Dataset, before: Phase, per_layer: int, attention: str = "hardmax",
                 lowered: bool = False) -> Phase:
    """The leader hats' blocks, the last one's attention the collapse
    (collapse_sa), their claims, the leaders and the tokens after them.

    The hats run in decreasing t across all sequences, ⌊width/4⌋ to a layer,
    and the highest hat of each layer also drops every token past its window
    by K (``above``), below every later window: with one hat per layer no
    hat's units are on for a token but its own and those of the hat that drops
    it, once, with slopes that cancel exactly — so no token's float error is
    magnified by more than one cancellation. With more, a token between two
    windows of one layer stays above the later ones, whose hats cancel on it."""
    d, seqs, first_block = dataset.d, before.tokens, before.span[1]
    keys = ordered(x[0] for s in seqs for x in s)
    big = fmpq(1, 64)  # K, the least power of two above the spread of t plus 1/64
    while big < keys[-1] - keys[0] + fmpq(1, 64):
        big *= 2
    leaders = place(dataset, seqs, choose(dataset, seqs), big, attention == "softmax",
                    lifted(dataset, before, attention, lowered))
    gain = leaders[0].gain
    g = unit(d, 0)  # the hats act on t alone: one coordinate, each pre-activation exact in floats (Sterbenz)
    position = {p.index: j for j, p in enumerate(dataset.pairs)}
    index = Projections({(p.index, i): x[0] for p, s in zip(dataset.pairs, seqs) for i, x in enumerate(s)})  # g = e_1

    # A layer's highest window may have tokens of other sequences above it: its hat also drops
    # them by K in t, below every later window, so no hat cancels on a token that an earlier
    # layer has cancelled on (for d = 2 the dropped t stay above −K: the collapse's scores still
    # favour each token's P leader).
    drop = tuple(-big if i == 0 else ZERO for i in range(d))

    def hat(leader: Leader, highest: bool) -> Hat:
        source = seqs[position[leader.sequence]][leader.token]
        k = bisect_left(keys, source[0])
        gap = min(min_gap(keys[max(k - 1, 0):k + 2]) or ONE, ONE)  # ≤ 1: windows stay clear of placed leaders
        if before.exact:
            return tent_hat(g, source, gap, sub(leader.point, source), ((leader.sequence, leader.token),),
                            leader.point, above=drop if highest else None)
        return flat_hat(g, source, gap, sub(leader.point, source), ((leader.sequence, leader.token),),
                        leader.point, above=drop if highest else None, half=len(keys) <= HALF_TOKENS)

    def t_of(leader: Leader) -> fmpq:
        return seqs[position[leader.sequence]][leader.token][0]

    by_t = sorted(leaders, key=t_of, reverse=True)
    layers = [by_t[k:k + per_layer] for k in range(0, len(by_t), per_layer)]
    blocks, claims = hat_blocks([[hat(l, r == 0) for r, l in enumerate(layer)] for layer in layers], d,
                                first_block, index, collapse_sa(d, gain))
    after = [list(s) for s in seqs]
    for leader in leaders:
        after[position[leader.sequence]][leader.token] = leader.point
    placed = {(l.sequence, l.token) for l in leaders}
    for (seq, i), v in index.value.items():  # the dropped tokens
        j = position[seq]
        if (seq, i) not in placed and v != dot(g, seqs[j][i]):
            after[j][i] = (seqs[j][i][0] + v - dot(g, seqs[j][i]),) + seqs[j][i][1:]
    return Phase("leaders", (first_block, first_block + len(blocks)), tuple(blocks), tuple(claims), frozen(after),
                 tuple(leaders))

