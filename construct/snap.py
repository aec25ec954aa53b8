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

Radii: R' = min(gap/2, 1/2), r = 3R'/4, gap the least distance between two
codes. Then r + R' < gap keeps every other code's plateau outside the window,
and R' ≤ 1/2 keeps every placed target out (codes exceed max|y_1| + 1). The
design's r = gap/8 would be sound too; a wider plateau gives a larger τ*.
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.construct.hats import dyadic_near, identity_sa, min_gap
from tfcert.construct.leaders import UP, Leader
from tfcert.construct.phase import Phase, frozen
from tfcert.verify.formats import FF, Block, Dataset
from tfcert.verify.numbers import ONE, Vec, scale, sub, unit

UNITS = 4
SHIFT = fmpq(1, 512)  # a snap's centre lies within this below its code


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


def radii(codes: list[fmpq]) -> tuple[fmpq, fmpq]:
    """(r, R') for codes at least ``gap`` apart."""
    gap = min_gap(sorted(codes))
    reach = min(gap / 2, fmpq(1, 2)) if gap is not None else fmpq(1, 2)
    return 3 * reach / 4, reach


def noise_radius(leaders: tuple[Leader, ...], d: int) -> fmpq:
    """The radius left around each code for softmax noise: the plateau
    radius r less the centre's shift and less r/8, kept for the rounding of
    a float run."""
    r, _ = radii([l.code(d) for l in leaders])
    return r - SHIFT - r / 8


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
    rounded down to a multiple of SHIFT, so every breakpoint is exact in
    binary64 and binary32 alike."""
    d, seqs, first_block = dataset.d, collapsed.tokens, collapsed.span[1]
    e = unit(d, UP)
    codes = {l: l.code(d) for l in leaders}
    r, reach = radii(list(codes.values()))
    position = {p.index: j for j, p in enumerate(dataset.pairs)}
    snaps = []
    for leader in sorted(leaders, key=codes.get, reverse=True):
        j = position[leader.sequence]
        cluster = scale(codes[leader], e)
        moves = tuple((leader.sequence, i) for i, x in enumerate(seqs[j]) if x == cluster)
        centre = dyadic_near(codes[leader], SHIFT)
        snaps.append(Snap(centre, r, reach, dataset.pairs[j].output[leader.output], moves))
    blocks, claims = [], []
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
