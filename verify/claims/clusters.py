"""clusters: after block k's attention, sequence j holds exactly
``distinct[j]`` distinct tokens — the collapse onto the leaders."""
from __future__ import annotations

from dataclasses import dataclass

from tfcert.verify.errors import InputError
from tfcert.verify.claims import Context, block_of, stated
from tfcert.verify.formats import array, fields, integer

KIND = "clusters"
LAYER = "sa"


@dataclass(frozen=True)
class Claim:
    block: int
    distinct: tuple[int, ...]


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    fields(raw, where, ("kind", "block", "distinct"))
    counts = array(raw.get("distinct"), f"{where}.distinct")
    if len(counts) != len(ctx.dataset.pairs):
        raise InputError(f"{where}.distinct: expected one count per sequence ({len(ctx.dataset.pairs)})")
    return Claim(block_of(raw, where, ctx),
                 tuple(integer(c, f"{where}.distinct[{j}]", 1, 10**9) for j, c in enumerate(counts)))


def check(claim: Claim, ctx: Context, step) -> list[str]:
    return [f"sequence {p.index}: " + stated("distinct tokens", n, len(set(seq)))
            for p, n, seq in zip(ctx.dataset.pairs, claim.distinct, step.after) if len(set(seq)) != n]
