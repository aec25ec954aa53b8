"""hat: a group of units of block k's feed-forward layer is a "hat" on the
direction w shared by their U rows.

* Region claim, proved by z3 over all of R: for every x with w·x ≤ lo or
  w·x ≥ hi the group adds exactly 0 (so it is zero on every token outside
  its window, whatever the tokens are) — or, with ``above``, exactly 0
  where w·x ≤ lo and exactly ``above`` where w·x ≥ hi.
* Replay: the tokens strictly inside the window before the layer are exactly
  ``moves`` (at least one); every other token's projection is at least ``margin`` outside
  the window; the named units alone (η x + their contribution) take every
  moved token exactly to ``to``, and after the layer it is exactly there.
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.verify.errors import InputError
from tfcert.verify.claims import Context, block_of, stated, token_refs, unit_list
from tfcert.verify.layers import relu
from tfcert.verify.formats import FF, array, fields, number, vector
from tfcert.verify.numbers import Vec, add, dot, scale, show
from tfcert.verify.regions import ramps_to, zero_outside

KIND = "hat"
LAYER = "ff"
ENCLOSURES = False
BELOW = False


@dataclass(frozen=True)
class Claim:
    block: int
    units: tuple[int, ...]
    lo: fmpq
    hi: fmpq
    moves: frozenset[tuple[int, int]]
    to: Vec
    margin: fmpq | None
    above: Vec | None


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    fields(raw, where, ("kind", "block", "units", "window", "moves", "to"), ("margin", "above"))
    block = block_of(raw, where, ctx)
    units = unit_list(raw["units"], f"{where}.units", ctx.model.blocks[block].ff.width)
    window = array(raw.get("window"), f"{where}.window")
    if len(window) != 2:
        raise InputError(f"{where}.window: expected [lo, hi]")
    moves = token_refs(raw["moves"], f"{where}.moves", ctx)
    margin = raw.get("margin")
    return Claim(block, units, number(window[0], f"{where}.window[0]"), number(window[1], f"{where}.window[1]"),
                 moves, vector(raw.get("to"), ctx.model.d, f"{where}.to"),
                 None if margin is None else number(margin, f"{where}.margin"),
                 vector(raw["above"], ctx.model.d, f"{where}.above") if "above" in raw else None)


def group(ff: FF, units: tuple[int, ...], x: Vec) -> Vec:
    """η x plus the named units' contribution Σ_j W_j σ(U_j·x + b_j): where x
    goes if no other unit acts on it."""
    out = scale(ff.eta, x)
    for j in units:
        out = add(out, scale(relu(dot(ff.U[j], x) + ff.b[j]), tuple(row[j] for row in ff.W)))
    return out


def static(claim: Claim, ff) -> list[str] | None:
    """The checks of the claim and the model alone that end the check early."""
    if any(ff.U[j] != ff.U[claim.units[0]] for j in claim.units):
        return ["the group's U rows differ: not a hat on one direction"]
    if not claim.lo < claim.hi:
        return [f"empty window ({show(claim.lo)}, {show(claim.hi)})"]
    if not claim.moves:
        return ["moves is empty: a hat moves at least one token, on which its `to` is checked"]
    return None


def tokens(claim: Claim, ctx: Context, step) -> tuple:
    """What the claim says of the tokens of ``step``: those strictly inside
    the window, the nearest projections outside it on each side (None where
    none is), and the failures of the moved tokens as ([sequence, token], message)."""
    ff = ctx.model.blocks[claim.block].ff
    ranked = step.projections(ff.U[claim.units[0]])
    inside = {ctx.ref(g) for g in ranked.inside(claim.lo, claim.hi)}
    moved = []
    for j, i in sorted(claim.moves & inside):
        if group(ff, claim.units, step.flat_before[ctx.flat(j, i)]) != claim.to:
            moved.append(((j, i), f"token [{j}, {i}]: the named units do not move it to the stated target"))
        landed = step.flat_after[ctx.flat(j, i)]
        if landed != claim.to:
            moved.append(((j, i), f"token [{j}, {i}]: lands at {[show(v) for v in landed]}, not at the stated target"))
    return (inside, *ranked.outside(claim.lo, claim.hi), moved)


def verdict(claim: Claim, ff, inside: set, below, above, moved: list) -> list[str]:
    """The failures, from the region query and what ``tokens`` found (of all
    the tokens: tfcert/shards.py merges the shards' into one)."""
    failures = []
    problem = (zero_outside(ff, claim.units, claim.lo, claim.hi) if claim.above is None
               else ramps_to(ff, claim.units, claim.lo, claim.hi, claim.above))
    if problem:
        failures.append(problem)
    outside = ([claim.lo - below] if below is not None else []) + ([above - claim.hi] if above is not None else [])
    margin = min(outside) if outside else None
    if inside != claim.moves:
        failures.append(stated("moves", sorted(claim.moves), sorted(inside)))
    if margin != claim.margin:
        failures.append(stated("margin", claim.margin, margin))
    return failures + [m for _, m in sorted(moved, key=lambda t: t[0])]


def check(claim: Claim, ctx: Context, step) -> list[str]:
    ff = ctx.model.blocks[claim.block].ff
    early = static(claim, ff)
    return early if early is not None else verdict(claim, ff, *tokens(claim, ctx, step))
