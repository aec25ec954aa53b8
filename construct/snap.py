"""Phase 4, interpolation: one 4-ReLU "snap" on coordinate 2 per code c,
under hardmax and softmax alike.

g(t) = Σ_k v_k σ(t − p_k), breakpoints p = (c−R', c−r, c+r, c+R'): zero for
t ≤ c−R' and t ≥ c+R', and g(t) = y − t·e on [c−r, c+r] (e = e_2), so every
token t·e with |t − c| ≤ r lands exactly on its target y. Slopes: v1 ramps
0 up to y − (c−r)e, v1 + v2 = −e (the plateau), and Σv = 0, Σ v_k p_k = 0
make it vanish beyond c+R'.

The plateau is what makes the model robust in floats: a code that errs by
less than r still lands on the float of y, and the error stops there.
Snaps run in decreasing code order and every code exceeds every target's
coordinate 2 by more than R', so each snap's units are zero — not merely
cancelling — on every token but its own cluster: placed targets and the
codes still waiting all lie below its window.

Radii: R' the largest power of two within gap/2 and min(code) − max y_1 − 1,
r = R'/2, gap the least distance between two codes. Then r + R' < gap keeps
every other code's plateau outside the window, and every placed target stays
1 below every window (codes exceed max y_1 + 3/2, so R' ≥ 1/2). A wider plateau
gives a larger τ* and absorbs the rounding of large codes; a narrower one has
gentler slopes (R' − r)⁻¹, whose products' rounding a float bound carries:
R'/2 (leaders.radii).

Where the leaders' codes are lifted (leaders.lifted), the phase's first block
takes the lift off every token first: one constant unit, exact in floats.
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.construct.hats import dyadic_near, exact_grid, identity_sa
from tfcert.construct.leaders import UP, Leader, radii
from tfcert.construct.phase import Phase, frozen
from tfcert.verify.formats import FF, Block, Dataset
from tfcert.verify.numbers import ONE, ZERO, Vec, scale, sub, unit

UNITS = 4
SHIFT = fmpq(1, 512)  # a snap's centre lies within this below its code (more for codes beyond 2^15: centre_step)


@dataclass(frozen=True)
class Snap:
    center: fmpq
    radius: fmpq
    reach: fmpq
    to: Vec
    moves: tuple[tuple[int, int], ...]  # [sequence file index, token index]

    @property
    def breakpoints(self) -> tuple[fmpq, fmpq, fmpq, fmpq]:
        c, r, R = self.center, self.radius, self.reach
        return c - R, c - r, c + r, c + R

    def slopes(self, e1: Vec) -> tuple[Vec, Vec, Vec, Vec]:
        p1, p2, p3, p4 = self.breakpoints
        v1 = scale(ONE / (p2 - p1), sub(self.to, scale(p2, e1)))
        v2 = sub(scale(-ONE, e1), v1)
        v4 = scale(ONE / (p4 - p3), sub(scale(-ONE, tuple(a * p1 + b * p2 for a, b in zip(v1, v2))), scale(p3, e1)))
        v3 = sub(e1, v4)
        return v1, v2, v3, v4


def centre_step(largest: fmpq, radius: fmpq) -> fmpq:
    """The least power of two ≥ SHIFT whose multiples below ``largest`` have at
    most 24 significant bits — centres (and so breakpoints) exact in binary32 —
    if that moves a centre by at most radius/8; else SHIFT (codes too large
    for their spacing: no grid keeps their breakpoints exact in binary32)."""
    return exact_grid(largest, SHIFT, radius / 8, (24,)) or SHIFT


def top_target(dataset: Dataset) -> fmpq:
    """Every target's coordinate 2 is at most this (the codes lie above it)."""
    return max(y[UP] for p in dataset.pairs for y in p.output)


def noise_radius(leaders: tuple[Leader, ...], d: int, top: fmpq) -> fmpq:
    """The radius left around each code for softmax noise: the plateau
    radius r less the centre's shift and less r/8, kept for the rounding of
    a float run."""
    codes = [l.code(d) for l in leaders]
    r, reach = radii(codes, top)
    return r - centre_step(max(codes) + reach, r) - r / 8


def lift_ff(lift: fmpq, d: int) -> FF:
    """x − lift·e_2 for every token: one constant unit relu(lift) with weight −1 on coordinate 2
    (η = 1). A float run subtracts lift = 3G from x_2 ∈ [4G, 5G) exactly (Sterbenz's lemma)."""
    return FF(ONE, (tuple(ZERO for _ in range(d)),), (lift,), tuple((-ONE if i == UP else ZERO,) for i in range(d)))


def snap_ff(snaps: list[Snap], d: int) -> FF:
    """One FF layer (η = 1) holding ``snaps`` side by side."""
    e1 = unit(d, UP)
    U, b, cols = [], [], []
    for snap in snaps:
        for p, v in zip(snap.breakpoints, snap.slopes(e1)):
            U.append(e1)
            b.append(-p)
            cols.append(v)
    return FF(ONE, tuple(U), tuple(b), tuple(tuple(col[i] for col in cols) for i in range(d)))


def snap_claims(snaps: list[Snap], block: int) -> list[dict]:
    return [{"kind": "snap", "block": block, "units": list(range(UNITS * k, UNITS * k + UNITS)), "coordinate": UP,
             "center": str(s.center), "radius": str(s.radius), "reach": str(s.reach),
             "moves": [list(m) for m in s.moves], "to": [str(v) for v in s.to]}
            for k, s in enumerate(snaps)]


def snap_phase(dataset: Dataset, collapsed: Phase, leaders: tuple[Leader, ...], per_layer: int) -> Phase:
    """The snaps' blocks and claims, and the tokens after them: the targets.
    ``collapsed``'s tokens are the hardmax collapse outputs code·e_2;
    softmax must leave each within noise_radius of them. Centres are codes
    rounded down to a multiple of centre_step, so every breakpoint is exact in
    binary64 and binary32 alike."""
    d, seqs, first_block = dataset.d, collapsed.tokens, collapsed.span[1]
    e = unit(d, UP)
    blocks, claims = [], []
    if lift := leaders[0].lift:  # lifted codes (leaders.lifted): one block takes the lift off every token
        blocks.append(Block(lift_ff(lift, d), identity_sa()))
        seqs = [[sub(x, scale(lift, e)) for x in s] for s in seqs]
    codes = {l: l.code(d) for l in leaders}
    r, reach = radii(list(codes.values()), top_target(dataset))
    step = centre_step(max(codes.values()) + reach, r)
    position = {p.index: j for j, p in enumerate(dataset.pairs)}
    snaps = []
    for leader in sorted(leaders, key=codes.get, reverse=True):
        j = position[leader.sequence]
        cluster = scale(codes[leader], e)
        moves = tuple((leader.sequence, i) for i, x in enumerate(seqs[j]) if x == cluster)
        centre = dyadic_near(codes[leader], step)
        snaps.append(Snap(centre, r, reach, dataset.pairs[j].output[leader.output], moves))
    for start in range(0, len(snaps), per_layer):
        group = snaps[start:start + per_layer]
        claims += snap_claims(group, first_block + len(blocks))
        blocks.append(Block(snap_ff(group, d), identity_sa()))
    after = [list(s) for s in seqs]
    for snap in snaps:
        for seq, i in snap.moves:
            after[position[seq]][i] = snap.to
    return Phase("interpolation", (first_block, first_block + len(blocks)), tuple(blocks), tuple(claims),
                 frozen(after))
