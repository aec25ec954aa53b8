"""snap: a group of 4 units of block k's feed-forward layer is a "snap" on
coordinate k: breakpoints c−R', c−r, c+r, c+R' (the group's biases, exactly).

* z3, over all of R: for every t ∈ [c−r, c+r], η·t·e_k plus the group's
  contribution is exactly ``to`` (the layer on the axis, other units aside);
  outside (c−R', c+R') the group adds exactly 0.
* Replay: the tokens whose enclosure meets (c−R', c+R') before the layer are
  exactly ``moves``; each lies on the e_k axis with its range inside
  [c−r, c+r]; after the layer each is exactly the point ``to``. Every other
  token (other clusters, targets already placed) is outside the window,
  where the group is zero.
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.verify.errors import InputError
from tfcert.verify.claims import Context, block_of, stated, token_refs, unit_list
from tfcert.verify.enclose import coordinate_range, is_point
from tfcert.verify.formats import fields, integer, number, vector
from tfcert.verify.numbers import Vec, show, unit
from tfcert.verify.regions import lands_on, zero_outside

KIND = "snap"
LAYER = "ff"
ENCLOSURES = True
BELOW = False


@dataclass(frozen=True)
class Claim:
    block: int
    units: tuple[int, ...]
    coordinate: int
    center: fmpq
    radius: fmpq  # r: the plateau half-width
    reach: fmpq  # R': the support half-width
    moves: frozenset[tuple[int, int]]
    to: Vec

    @property
    def breakpoints(self) -> list[fmpq]:
        c, r, R = self.center, self.radius, self.reach
        return [c - R, c - r, c + r, c + R]


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    fields(raw, where, ("kind", "block", "units", "coordinate", "center", "radius", "reach", "moves", "to"))
    block = block_of(raw, where, ctx)
    units = unit_list(raw["units"], f"{where}.units", ctx.model.blocks[block].ff.width)
    if len(units) != 4:
        raise InputError(f"{where}.units: a snap has 4 distinct units")
    moves = token_refs(raw["moves"], f"{where}.moves", ctx)
    return Claim(block, units, integer(raw.get("coordinate"), f"{where}.coordinate", 0, ctx.model.d - 1),
                 number(raw.get("center"), f"{where}.center"), number(raw.get("radius"), f"{where}.radius"),
                 number(raw.get("reach"), f"{where}.reach"), moves,
                 vector(raw.get("to"), ctx.model.d, f"{where}.to"))


def static(claim: Claim, ff, d: int) -> list[str] | None:
    """The checks of the claim and the model alone that end the check early."""
    k = claim.coordinate
    if any(ff.U[j] != unit(d, k) for j in claim.units):
        return [f"the group's U rows are not e_{k + 1}: not a snap on coordinate {k + 1}"]
    if not 0 < claim.radius < claim.reach:
        return [f"need 0 < radius < reach, got radius {show(claim.radius)}, reach {show(claim.reach)}"]
    return None


def tokens(claim: Claim, ctx: Context, step) -> tuple:
    """What the claim says of the tokens of ``step``: whether they are exact
    points (then ordered by their coordinate, else by token), the tokens whose
    enclosure meets the reach, the plateau failures as ((coordinate, sequence,
    token), [sequence, token], message) and the landing failures as
    ([sequence, token], message)."""
    k = claim.coordinate
    lo, hi = claim.center - claim.reach, claim.center + claim.reach
    if step.exact:  # points: the tokens with lo < x_k < hi, by binary search on the sorted coordinate
        candidates = step.projections(unit(ctx.model.d, k)).inside(lo, hi)
    else:
        candidates = range(len(step.flat_before))
    inside, plateau, landed, axis = set(), [], [], {}  # axis: by id(x), whether x is on the axis (once per tuple)
    for g in candidates:
        x, ref = step.flat_before[g], ctx.ref(g)
        a, b = coordinate_range(x, k)
        if b > lo and a < hi:
            inside.add(ref)
            if ref not in claim.moves:
                continue
            if id(x) not in axis:  # a cluster's tokens share one tuple (the replay's image of their mean)
                axis[id(x)] = all(not x[i] if is_point(x) else coordinate_range(x, i) == (0, 0)
                                  for i in range(ctx.model.d) if i != k)
            if not (axis[id(x)] and claim.center - claim.radius <= a and b <= claim.center + claim.radius):
                plateau.append(((a, *ref), ref, f"token {list(ref)}: enclosure "
                                f"[{show(a)}, {show(b)}] on coordinate {k + 1} is not on the axis "
                                f"inside the plateau"))
    for j, i in sorted(claim.moves & inside):
        x = step.flat_after[ctx.flat(j, i)]
        if not is_point(x) or x != claim.to:
            landed.append(((j, i), f"token [{j}, {i}]: does not land exactly on the stated target"))
    return step.exact, inside, plateau, landed


def verdict(claim: Claim, ff, exact: bool, inside: set, plateau: list, landed: list) -> list[str]:
    """The failures, from the region queries and what ``tokens`` found (of
    all the tokens: tfcert/shards.py merges the shards' into one)."""
    k = claim.coordinate
    failures = []
    actual = sorted(-ff.b[j] for j in claim.units)
    if actual != claim.breakpoints:
        failures.append(stated("breakpoints", [str(v) for v in claim.breakpoints], [str(v) for v in actual]))
    for problem in (lands_on(ff, claim.units, k, claim.center, claim.radius, claim.to),
                    zero_outside(ff, claim.units, claim.center - claim.reach, claim.center + claim.reach)):
        if problem:
            failures.append(problem)
    failures += [m for *_, m in sorted(plateau, key=lambda t: t[0] if exact else t[1])]
    if inside != claim.moves:
        failures.append(stated("moves", sorted(claim.moves), sorted(inside)))
    return failures + [m for _, m in sorted(landed, key=lambda t: t[0])]


def check(claim: Claim, ctx: Context, step) -> list[str]:
    ff = ctx.model.blocks[claim.block].ff
    early = static(claim, ff, ctx.model.d)
    return early if early is not None else verdict(claim, ff, *tokens(claim, ctx, step))
