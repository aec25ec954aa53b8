"""exact: the model interpolates — for every sequence the set of output
tokens equals the target set (Hausdorff distance 0), checked on the exact
replay."""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.verify.claims import Context
from tfcert.verify.enclose import is_point, width
from tfcert.verify.formats import fields
from tfcert.verify.numbers import Vec, dot, each_once, key, show, sub

KIND = "exact"
LAYER = "end"
ENCLOSURES = True  # an enclosure that is not a single point fails the claim
BELOW = False


@dataclass(frozen=True)
class Claim:
    pass


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    fields(raw, where, ("kind",))
    return Claim()


def hausdorff_squared(a: tuple[Vec, ...], b: tuple[Vec, ...]) -> fmpq:
    """The squared Euclidean Hausdorff distance between two finite sets, exactly."""
    def directed(p, q):
        return max(min(dot(sub(x, y), sub(x, y)) for y in q) for x in p)
    return max(directed(a, b), directed(b, a))


def check(claim: Claim, ctx: Context, step) -> list[str]:
    failures = []
    for pair, out in zip(ctx.dataset.pairs, step.after):
        loose = [i for i, x in enumerate(out) if not is_point(x)]
        if loose:
            failures.append(f"sequence {pair.index}: token {loose[0]} is not certified to a single point "
                            f"(enclosure width {show(width(out[loose[0]]))}; {len(loose)} such token(s))")
        elif {key(x) for x in each_once(out)} != {key(y) for y in pair.output}:  # key: equal exactly when the vectors are
            failures.append(f"sequence {pair.index}: output set differs from the target set "
                            f"(squared Hausdorff distance {show(hausdorff_squared(out, pair.output))})")
    return failures
