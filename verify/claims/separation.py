"""separation: after block k, the projections of all tokens of the whole
dataset on ``direction`` are pairwise distinct, with least gap ``min_gap``.
Distinct projections imply distinct tokens, so later token-wise layers can
move each token alone."""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.verify.claims import Context, block_of, optional_number, stated
from tfcert.verify.formats import fields, nonzero, vector
from tfcert.verify.layers import sparse_dot
from tfcert.verify.numbers import Vec, show

KIND = "separation"
LAYER = "sa"
ENCLOSURES = False
BELOW = False


@dataclass(frozen=True)
class Claim:
    block: int
    direction: Vec
    min_gap: fmpq | None  # None: fewer than two tokens


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    fields(raw, where, ("kind", "block", "direction"), ("min_gap",))
    return Claim(block_of(raw, where, ctx), vector(raw.get("direction"), ctx.model.d, f"{where}.direction"),
                 optional_number(raw.get("min_gap"), f"{where}.min_gap"))


def projections(direction: Vec, tokens) -> list[fmpq]:
    """The tokens' projections on ``direction``, sorted; over its non-zero entries (a construction's is e_1)."""
    support = nonzero(direction)
    return sorted(sparse_dot(support, x) for x in tokens)


def min_gap(direction: Vec, sequences) -> fmpq | None:
    values = projections(direction, (x for seq in sequences for x in seq))
    gaps = [b - a for a, b in zip(values, values[1:])]
    return min(gaps) if gaps else None


def check(claim: Claim, ctx: Context, step) -> list[str]:
    gap = min_gap(claim.direction, step.after)
    failures = []
    if gap is not None and gap <= 0:
        failures.append(f"two tokens share a projection (gap {show(gap)}): not separated")
    if gap != claim.min_gap:
        failures.append(stated("min_gap", claim.min_gap, gap))
    return failures
