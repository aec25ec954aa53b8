"""hat: a group of units of block k's feed-forward layer is a "hat" on the
direction w shared by their U rows.

* Region claim, proved by z3 over all of R: for every x with w·x ≤ lo or
  w·x ≥ hi the group adds exactly 0 (so it is zero on every token outside
  its window, whatever the tokens are).
* Replay: the tokens strictly inside the window before the layer are exactly
  ``moves``; every other token's projection is at least ``margin`` outside
  the window; and after the layer every moved token is exactly ``to``.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from flint import fmpq

from tfcert.verify.errors import InputError
from tfcert.verify.claims import Context, block_of, stated, token_ref
from tfcert.verify.formats import array, integer, number, vector
from tfcert.verify.numbers import Vec
from tfcert.verify.regions import zero_outside

KIND = "hat"
LAYER = "ff"


@dataclass(frozen=True)
class Claim:
    block: int
    units: tuple[int, ...]
    lo: fmpq
    hi: fmpq
    moves: frozenset[tuple[int, int]]
    to: Vec
    margin: fmpq | None


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    block = block_of(raw, where, ctx)
    width = ctx.model.blocks[block].ff.width
    units = tuple(integer(u, f"{where}.units[{i}]", 0, width - 1)
                  for i, u in enumerate(array(raw.get("units"), f"{where}.units")))
    if not units:
        raise InputError(f"{where}.units: empty")
    window = array(raw.get("window"), f"{where}.window")
    if len(window) != 2:
        raise InputError(f"{where}.window: expected [lo, hi]")
    moves = frozenset(token_ref(m, f"{where}.moves[{i}]", ctx)
                      for i, m in enumerate(array(raw.get("moves"), f"{where}.moves")))
    margin = raw.get("margin")
    return Claim(block, units, number(window[0], f"{where}.window[0]"), number(window[1], f"{where}.window[1]"),
                 moves, vector(raw.get("to"), ctx.model.d, f"{where}.to"),
                 None if margin is None else number(margin, f"{where}.margin"))


def check(claim: Claim, ctx: Context, step) -> list[str]:
    ff = ctx.model.blocks[claim.block].ff
    w = ff.U[claim.units[0]]
    if any(ff.U[j] != w for j in claim.units):
        return ["the group's U rows differ: not a hat on one direction"]
    failures = []
    problem = zero_outside(ff, claim.units, claim.lo, claim.hi)
    if problem:
        failures.append(problem)
    keys, ids = step.projections(w)
    start, stop = bisect_right(keys, claim.lo), bisect_left(keys, claim.hi)
    inside = {ctx.ref(g) for g in ids[start:stop]}
    outside = ([claim.lo - keys[start - 1]] if start > 0 else []) + ([keys[stop] - claim.hi] if stop < len(keys) else [])
    margin = min(outside) if outside else None
    if inside != claim.moves:
        failures.append(stated("moves", sorted(claim.moves), sorted(inside)))
    if margin != claim.margin:
        failures.append(stated("margin", claim.margin, margin))
    for j, i in sorted(claim.moves & inside):
        landed = step.after[ctx.position[j]][i]
        if landed != claim.to:
            failures.append(f"token [{j}, {i}]: lands at {[str(v) for v in landed]}, not at the stated target")
    return failures
