"""size: the network's blocks, width and parameter count, and the bounds of
the theorem it is measured against, all recomputed from the model and the
dataset; ``within`` states whether every value is within its bound.

Parameters count every stored number (docs/certificates.md): η, U, b, W of each FF,
ρ and A, V in their low-rank form (scale plus 2d per term). The parameter
bound is the block bound times the largest block of width 4 with rank-1 A
and V: (8d + 5) + (4d + 3) = 12d + 8 — an explicit O(d Σm) constant.
"""
from __future__ import annotations

from dataclasses import dataclass

from tfcert.verify.errors import InputError
from tfcert.verify.claims import Context, stated
from tfcert.verify.formats import Dataset, Model, fields, integer
from tfcert.verify.numbers import show

KIND = "size"
LAYER = None
ENCLOSURES = False
BELOW = False
KEYS = ("blocks", "width", "parameters")

THEOREM = {"hardmax": "1.6", "softmax": "1.8"}  # the theorem a model of each attention is measured against
THEOREMS = {
    # theorem: (blocks bound as a function of (Σm, N), width bound)
    "1.6": (lambda sm, n: 2 * sm + 2 * n + 1, 4),  # hardmax
    "1.8": (lambda sm, n: 2 * sm + 3 * n, 4),  # softmax
}


def parameters(model: Model) -> int:
    d, total = model.d, 0
    for block in model.blocks:
        w = block.ff.width
        total += 1 + w * d + w + d * w
        total += 1 + (1 + 2 * d * len(block.sa.A.terms)) + (1 + 2 * d * len(block.sa.V.terms))
    return total


def measure(model: Model, dataset: Dataset, theorem: str) -> dict:
    """The size report: values, bounds and whether all values are within."""
    blocks_bound, width_bound = THEOREMS[theorem]
    sm, n, d = dataset.total_outputs, len(dataset.pairs), dataset.d
    bound = blocks_bound(sm, n)
    values = {"blocks": len(model.blocks), "width": max((b.ff.width for b in model.blocks), default=0),
              "parameters": parameters(model)}
    bounds = {"blocks": bound, "width": width_bound, "parameters": bound * (12 * d + 8)}
    return {"theorem": theorem, **values, "bounds": bounds, "d_sum_m": d * sm,
            "within": all(values[k] <= bounds[k] for k in bounds)}


@dataclass(frozen=True)
class Claim:
    stated: dict


def parse(raw: dict, where: str, ctx: Context) -> Claim:
    fields(raw, where, ("kind", "theorem", "bounds", *KEYS, "d_sum_m", "within"))
    theorem = raw.get("theorem")
    if not isinstance(theorem, str) or theorem not in THEOREMS:
        raise InputError(f"{where}.theorem: expected one of {sorted(THEOREMS)}, got {show(repr(theorem))}")
    bounds = fields(raw.get("bounds"), f"{where}.bounds", KEYS)
    for key in KEYS + ("d_sum_m",):
        integer(raw.get(key), f"{where}.{key}", 0, 10**18)
    for key in KEYS:
        integer(bounds[key], f"{where}.bounds.{key}", 0, 10**18)
    if not isinstance(raw.get("within"), bool):
        raise InputError(f"{where}.within: expected true or false")
    return Claim({k: v for k, v in raw.items() if k != "kind"})


def check(claim: Claim, ctx: Context, step) -> list[str]:
    theorem = THEOREM[ctx.model.attention]
    if claim.stated["theorem"] != theorem:
        return [f"theorem {claim.stated['theorem']}: a {ctx.model.attention} model is measured against "
                f"Theorem {theorem}"]
    actual = measure(ctx.model, ctx.dataset, theorem)
    return [stated(key, claim.stated.get(key), actual[key]) for key in actual if claim.stated.get(key) != actual[key]]
