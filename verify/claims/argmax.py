"""argmax: in block k's (hardmax) attention, every token's argmax set and
its gap (best score minus the best score outside the argmax set) are as
stated; ``ties`` counts tokens whose argmax set has more than one element."""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.verify.errors import InputError
from tfcert.verify.claims import Context, block_of, optional_number, stated
from tfcert.verify.formats import array, fields, integer

KIND = "argmax"
LAYER = "sa"
ENCLOSURES = True  # reads only the attention, which exists only for exact inputs
BELOW = False


@dataclass(frozen=True)
class Claim:
    block: int
    tokens: tuple[tuple[tuple[tuple[int, ...], fmpq | None], ...], ...]
    ties: int


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    fields(raw, where, ("kind", "block", "tokens", "ties"))
    seqs = array(raw.get("tokens"), f"{where}.tokens")
    if len(seqs) != len(ctx.dataset.pairs):
        raise InputError(f"{where}.tokens: expected one list per sequence kept ({len(ctx.dataset.pairs)}: "
                         f"a pair dropped as a duplicate has none)")
    parsed = []
    for j, (seq, pair) in enumerate(zip(seqs, ctx.dataset.pairs)):
        items = array(seq, f"{where}.tokens[{j}]")
        if len(items) != len(pair.input):
            raise InputError(f"{where}.tokens[{j}]: expected {len(pair.input)} tokens")
        row = []
        for i, item in enumerate(items):
            at = f"{where}.tokens[{j}][{i}]"
            entry = array(item, at)
            if len(entry) != 2:
                raise InputError(f"{at}: expected [argmax indices, gap]")
            idx = tuple(integer(a, f"{at}[0]", 0, len(pair.input) - 1) for a in array(entry[0], f"{at}[0]"))
            row.append((idx, optional_number(entry[1], f"{at}[1]")))
        parsed.append(tuple(row))
    return Claim(block_of(raw, where, ctx), tuple(parsed),
                 integer(raw.get("ties"), f"{where}.ties", 0, 10**12))


def check(claim: Claim, ctx: Context, step) -> list[str]:
    if step.attention is None:
        return ["the layer's attention is not a scored hardmax (identity or A = 0)"]
    failures, ties = [], 0
    for pair, stated_seq, actual_seq in zip(ctx.dataset.pairs, claim.tokens, step.attention):
        for i, ((idx, gap), att) in enumerate(zip(stated_seq, actual_seq)):
            ties += len(att.argmax) > 1
            if idx != att.argmax or gap != att.gap:
                failures.append(f"token [{pair.index}, {i}]: " + stated(
                    "argmax, gap", (list(idx), str(gap)), (list(att.argmax), str(att.gap))))
    if ties != claim.ties:
        failures.append(stated("ties", claim.ties, ties))
    return failures
