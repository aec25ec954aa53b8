"""clusters: after block k's attention, the j-th sequence kept (a pair
dropped as a duplicate has no entry) holds exactly ``distinct[j]`` distinct
tokens — the collapse onto the leaders."""
from __future__ import annotations

from dataclasses import dataclass

from tfcert.verify.errors import InputError
from tfcert.verify.claims import Context, block_of, stated
from tfcert.verify.formats import array, fields, integer
from tfcert.verify.numbers import each_once, key

KIND = "clusters"
LAYER = "sa"
ENCLOSURES = False
BELOW = False


@dataclass(frozen=True)
class Claim:
    block: int
    distinct: tuple[int, ...]


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    fields(raw, where, ("kind", "block", "distinct"))
    counts = array(raw.get("distinct"), f"{where}.distinct")
    if len(counts) != len(ctx.dataset.pairs):
        raise InputError(f"{where}.distinct: expected one count per sequence kept ({len(ctx.dataset.pairs)}: "
                         f"a pair dropped as a duplicate has none)")
    return Claim(block_of(raw, where, ctx),
                 tuple(integer(c, f"{where}.distinct[{j}]", 1, 10**9) for j, c in enumerate(counts)))


def check(claim: Claim, ctx: Context, step) -> list[str]:
    seen = [len({key(x) for x in each_once(seq)}) for seq in step.after]  # key: equal exactly when the vectors are
    return [f"sequence {p.index}: " + stated("distinct tokens", n, k)
            for p, n, k in zip(ctx.dataset.pairs, claim.distinct, seen) if k != n]
