"""Claim kinds: one module each, meeting the ``ClaimKind`` protocol below —
all that check.py knows of a claim. Nothing in the kernel names a kind to
decide when or how it is checked."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from flint import fmpq

from tfcert.verify.errors import InputError
from tfcert.verify.formats import Dataset, Model, array, integer, number
from tfcert.verify.numbers import show


class ClaimKind(Protocol):
    """A claim module. ``LAYER``: the replay step it is checked at — "ff" or
    "sa" (its ``block``'s layer), "end" (the final tokens), None (static,
    before the replay), or "trace" (it sees every step: see ``TraceKind``).
    ``ENCLOSURES``: it can be checked where tokens are softmax enclosures
    rather than exact points. ``BELOW``: it speaks about every temperature up
    to the model's, so the replay must give enclosures valid there."""
    KIND: str
    LAYER: str | None
    ENCLOSURES: bool
    BELOW: bool

    def parse(self, raw: dict, where: str, ctx: "Context") -> object:
        """The claim's fields, validated (InputError naming ``where`` otherwise)."""

    def check(self, claim: object, ctx: "Context", step: object) -> list[str]:
        """The failures of the recomputed claim; [] when it holds. ``step``:
        the replay's Step at LAYER (None for a static claim), or the
        observer of a trace claim once it has seen every step."""


class TraceKind(ClaimKind, Protocol):
    """A claim that follows the whole replay through an observer, fed every
    step at the model's own temperature, then finished."""

    def observer(self, claim: object, ctx: "Context") -> "Observer":
        """A fresh observer for this claim."""


class Observer(Protocol):
    failure: str | None  # set once nothing more can be proven: the replay may stop feeding it

    def step(self, step: object) -> None: ...

    def finish(self) -> None: ...


@dataclass(frozen=True)
class Context:
    """What every claim may consult: the model, the dataset, and the maps
    between a sequence's file index, its position, and flat token ids."""
    model: Model
    dataset: Dataset
    certificate: dict

    @cached_property
    def position(self) -> dict[int, int]:
        return {p.index: j for j, p in enumerate(self.dataset.pairs)}

    @cached_property
    def _refs(self) -> list[tuple[int, int]]:
        return [(p.index, i) for p in self.dataset.pairs for i in range(len(p.input))]

    @cached_property
    def _starts(self) -> dict[int, int]:
        out, start = {}, 0
        for p in self.dataset.pairs:
            out[p.index] = start
            start += len(p.input)
        return out

    def flat(self, sequence: int, token: int) -> int:
        """The flat token id of [sequence file index, token index]."""
        return self._starts[sequence] + token

    def ref(self, g: int) -> tuple[int, int]:
        """[sequence file index, token index] of flat token id ``g``."""
        return self._refs[g]


def block_of(raw: dict, where: str, ctx: Context) -> int:
    if not ctx.model.blocks:
        raise InputError(f"{where}.block: the model has no blocks")
    return integer(raw.get("block"), f"{where}.block", 0, len(ctx.model.blocks) - 1)


def token_ref(value: object, where: str, ctx: Context) -> tuple[int, int]:
    """[sequence, token]: the sequence's index in the dataset file and the
    token's index in its input list."""
    pair = array(value, where)
    if len(pair) != 2:
        raise InputError(f"{where}: expected [sequence, token]")
    j = integer(pair[0], f"{where}[0]", 0, 10**9)
    if j not in ctx.position:
        raise InputError(f"{where}[0]: no sequence {j} in the dataset")
    i = integer(pair[1], f"{where}[1]", 0, len(ctx.dataset.pairs[ctx.position[j]].input) - 1)
    return j, i


def token_refs(value: object, where: str, ctx: Context) -> frozenset[tuple[int, int]]:
    """A list of distinct [sequence, token] references."""
    refs = [token_ref(m, f"{where}[{i}]", ctx) for i, m in enumerate(array(value, where))]
    if len(set(refs)) != len(refs):
        raise InputError(f"{where}: a token is listed twice")
    return frozenset(refs)


def unit_list(value: object, where: str, width: int) -> tuple[int, ...]:
    """A non-empty list of distinct unit indices of a layer of ``width`` units."""
    units = tuple(integer(u, f"{where}[{i}]", 0, width - 1) for i, u in enumerate(array(value, where)))
    if not units:
        raise InputError(f"{where}: empty")
    if len(set(units)) != len(units):
        raise InputError(f"{where}: a unit is listed twice")
    return units


def optional_number(value: object, where: str) -> fmpq | None:
    return None if value is None else number(value, where)


def stated(name: str, claimed: object, actual: object) -> str:
    return f"{name}: stated {show(claimed)}, recomputed {show(actual)}"

