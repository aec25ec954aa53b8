"""Phase 4, interpolation: one hat on coordinate 1 per code c sends the whole
cluster c·e1 to its target y. Every code exceeds max|y_1| + 1 and the
windows have half-width ≤ 1, so a token already at its target never enters
a later window."""
from __future__ import annotations

from flint import fmpq

from tfcert.construct.hats import Hat, hat_blocks, min_gap
from tfcert.construct.leaders import Leader
from tfcert.verify.formats import Dataset
from tfcert.verify.numbers import Vec, scale, sub, unit

ONE, ZERO = fmpq(1), fmpq(0)


def interpolation_phase(dataset: Dataset, seqs: list[list[Vec]], leaders: list[Leader],
                        first_block: int, per_layer: int):
    """Returns (blocks, claims, tokens after the phase)."""
    d = dataset.d
    e1 = unit(d, 0)
    codes = sorted(l.code for l in leaders)
    eps = min(ONE, (min_gap(codes) or 2 * ONE) / 2)
    position = {p.index: j for j, p in enumerate(dataset.pairs)}
    hats = []
    for leader in leaders:
        j = position[leader.sequence]
        y = dataset.pairs[j].output[leader.token]
        cluster = scale(leader.code, e1)
        moves = tuple((leader.sequence, i) for i, x in enumerate(seqs[j]) if x == cluster)
        hats.append(Hat(e1, leader.code, eps, sub(y, cluster), moves, y))
    projections = {(p.index, i): x[0] for p, s in zip(dataset.pairs, seqs) for i, x in enumerate(s)}
    blocks, claims = hat_blocks(hats, per_layer, d, first_block, projections)
    after = [list(s) for s in seqs]
    for hat in hats:
        for seq, i in hat.moves:
            after[position[seq]][i] = hat.to
    return blocks, claims, after
