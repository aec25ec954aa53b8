"""The one shape every phase of the construction returns: build.py chains
them, each phase reading what the one before it hands on."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flint import fmpq

from tfcert.verify.formats import Block
from tfcert.verify.numbers import Vec

if TYPE_CHECKING:
    from tfcert.construct.leaders import Leader

Tokens = tuple[tuple[Vec, ...], ...]  # every sequence's tokens, in dataset order


@dataclass(frozen=True)
class Phase:
    """A phase of the construction: the blocks it adds to the model, the block
    range its claims speak about (its blocks', or for the collapse the block it
    reads), its claims, and what the next phase needs: every sequence's tokens
    after it; from the leader phase the leaders (the snaps' codes and targets);
    from the softmax collapse τ*, the model's temperature."""
    name: str
    span: tuple[int, int]
    blocks: tuple[Block, ...]
    claims: tuple[dict, ...]
    tokens: Tokens
    leaders: tuple[Leader, ...] = ()
    temperature: fmpq | None = None
    exact: bool = False  # separation: every float run, binary16 and wider, computes each token's t exactly


def frozen(seqs: list[list[Vec]]) -> Tokens:
    return tuple(tuple(s) for s in seqs)
