"""Phase 0, compress — only for data of many scales: blocks that map each
coordinate by a log-like, increasing, piecewise linear function, so that a
later projection onto one scalar t can still tell the tokens apart in a float
run (docs/construction.md, "Compression").

Coordinates from 1e-6 to 9e6 side by side (two tokens that share a large
coordinate and differ only in a small one) cannot be told apart by any
projection t = w·x in binary32: the difference is below t's rounding. Layer
k divides the slope of every coordinate beyond its breakpoints ±c_k by
FACTOR, x ↦ x − (1 − 1/FACTOR)·(relu(x − c_k) − relu(−x − c_k)), the
breakpoints the images of b, FACTOR·b, FACTOR²·b, … (b the largest power of
two at most the least nonzero |coordinate|). After K layers each interval
[b·4^k, b·4^(k+1)] is mapped onto one of length (3/4)·b: values keep their
order, relative differences within an interval become differences of about
b over the whole range, and every coordinate ends within about (3/4)·K·b.

Each unit reads one coordinate (a float run computes its pre-activation with
one rounding, and exactly near the breakpoint), and subtracts a fixed share
of the excess: no layer magnifies an error, and each shrinks what lies
beyond its breakpoint. A layer's rounding is relative to the value before
it, which the layer divides by up to FACTOR: the smaller FACTOR, the smaller
the error relative to the compressed value (about FACTOR·u/(1 − 1/FACTOR)
in all) and the more layers. 16 left survey seed 154 (d = 3, 148 tokens)
leaders whose error in t exceeded their plateau; 4 gives it a binary32 claim,
for twice the layers (about 22 for 13 decades). Skipped (no blocks) where the nonzero coordinates
span at most RANGE (every example bundle and measurement table), or where a
projection of the raw tokens already leaves every leader hat room in binary32."""
from __future__ import annotations

from flint import fmpq

from tfcert.construct.hats import identity_sa, power_below
from tfcert.construct.phase import Phase, frozen
from tfcert.construct.separation import crowded
from tfcert.verify.formats import FF, Block, Dataset
from tfcert.verify.layers import apply_ff
from tfcert.verify.numbers import ONE, ZERO, each_once

RANGE = fmpq(2) ** 16  # compress where max|x| / min nonzero |x| exceeds this
FACTOR = 4  # each layer divides the slope beyond its breakpoint by this
WIDTH = 4  # units per FF layer (one breakpoint of one coordinate's side each)


def compress(dataset: Dataset, attention: str = "hardmax") -> Phase:
    """The compression phase: its blocks (none where the data need none), no
    claims of its own (the final exact claim covers them), and the tokens
    after it. Compressed where the nonzero coordinates span more than RANGE
    and no projection of the raw tokens leaves every leader hat room in
    binary32 (separation.crowded): in d = 2 or 3, tokens that share a large
    coordinate; in high d, tokens differ in some large coordinate anyway."""
    seqs = [list(p.input) for p in dataset.pairs]
    sizes = [abs(v) for v in each_once(v for s in seqs for x in s for v in x if v)]  # a parse shares equal numbers
    least, largest = (min(sizes), max(sizes)) if sizes else (None, None)
    if not sizes or largest <= RANGE * least or not crowded(
            seqs, [len(p.output) for p in dataset.pairs], dataset.d, attention == "softmax"):
        return Phase("compress", (0, 0), (), (), frozen(seqs))
    d, share = dataset.d, 1 - fmpq(1, FACTOR)
    breakpoints, original = [], power_below(least)
    slope, offset = ONE, ZERO  # the layers so far beyond their breakpoints, where each is x ↦ x/FACTOR + share·c
    while original < largest:  # breakpoint k: the image of b·FACTOR^k after the layers before it,
        c = slope * original + offset  # which lies beyond each of theirs (the layers keep order)
        breakpoints.append(c)
        slope, offset = slope / FACTOR, offset / FACTOR + share * c
        original *= FACTOR
    blocks = []
    for c in breakpoints:
        units = [(i, s) for i in range(d) for s in (ONE, -ONE) if any(s * x[i] > c for q in seqs for x in q)]
        for start in range(0, len(units), WIDTH):
            group = units[start:start + WIDTH]
            U = tuple(tuple(s if j == i else ZERO for j in range(d)) for i, s in group)
            W = tuple(tuple(-s * share if i == j else ZERO for i, s in group) for j in range(d))
            ff = FF(ONE, U, tuple(-c for _ in group), W)
            blocks.append(Block(ff, identity_sa()))
            seqs = [[apply_ff(ff, x) for x in q] for q in seqs]
    return Phase("compress", (0, len(blocks)), tuple(blocks), (), frozen(seqs))
