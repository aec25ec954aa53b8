"""uniform_attention: block k's A is the zero matrix, so every score ties
and the attention is the exact mean of the sequence, for hardmax and for
softmax at every temperature."""
from __future__ import annotations

from dataclasses import dataclass

from tfcert.verify.claims import Context, block_of
from tfcert.verify.layers import is_zero_matrix
from tfcert.verify.formats import fields

KIND = "uniform_attention"
LAYER = None
ENCLOSURES = False
BELOW = False


@dataclass(frozen=True)
class Claim:
    block: int


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    fields(raw, where, ("kind", "block"))
    return Claim(block_of(raw, where, ctx))


def check(claim: Claim, ctx: Context, step) -> list[str]:
    A = ctx.model.blocks[claim.block].sa.A
    return [] if is_zero_matrix(A, ctx.model.d) else ["A is not the zero matrix"]
