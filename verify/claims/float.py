"""float: the model, run in an IEEE binary format, stays within ``bound`` of
its exact outputs.

The float run this speaks about: every parameter and input coordinate is
rounded to the nearest number of the format (ties to even); every layer is
evaluated by its formula with round-to-nearest arithmetic, each sum and dot
product in *any* order, with or without fused multiply-add:

* FF: η x + W relu(U x + b);
* scores ⟨A x_i, x_l⟩ from the rounded scale, u_k, v_k — as a dense
  A = scale·I + Σ u_k v_kᵀ and a bilinear form, or in the low-rank form
  (scale·x_i + Σ u_k (v_k·x_i), dotted with x_l, or the other way round; or
  scale·⟨x_i, x_l⟩ + Σ (v_k·x_i)(u_k·x_l));
* hardmax: the argmax set by exact comparison of the float scores, its
  tokens averaged (a single argmax is copied exactly);
* softmax: exp(s/τ − max) / Σ exp(…), exp within ``EXP_ULPS`` ulps (2)
  (relative, or subnormal spacings below the normal range), normalizing
  before or after the weighted sum;
* SA output ρ x_i + V m_i, V as dense or low-rank.

Claim: every coordinate of every final token of the float run is within
``bound`` of the exact final token, so each output set lies within ``bound``
(max-norm Hausdorff) of its target set when the ``exact`` claim holds.

Proved by verify/float_analysis.py (forward error analysis beside the exact
replay; the argument is in its docstring).
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.verify.errors import InputError
from tfcert.verify.claims import Context
from tfcert.verify.float_analysis import Analysis, approx
from tfcert.verify.floats import FORMATS, Format
from tfcert.verify.formats import fields, number

KIND = "float"
LAYER = "trace"
ENCLOSURES = True
BELOW = False


@dataclass(frozen=True)
class Claim:
    format: Format
    bound: fmpq


def parse(raw: dict, where: str, context: Context) -> Claim:
    fields(raw, where, ("kind", "format", "bound"))
    name = raw.get("format")
    if not isinstance(name, str) or name not in FORMATS:  # a list or dict is not hashable: no TypeError
        raise InputError(f"{where}.format: expected one of {sorted(FORMATS)}, got {name!r}")
    bound = number(raw.get("bound"), f"{where}.bound")
    if bound < 0:
        raise InputError(f"{where}.bound: must be ≥ 0")
    return Claim(FORMATS[name], bound)


def observer(claim: Claim, context: Context) -> Analysis:
    """The analysis that follows the replay for this claim's format."""
    return Analysis(context.model, [p.input for p in context.dataset.pairs], claim.format)


def check(claim: Claim, context: Context, analysis: Analysis) -> list[str]:
    """``analysis`` has seen every step of the replay and is finished."""
    if analysis.failure is not None:
        return [f"no {claim.format.name} bound: {analysis.failure}"]
    if analysis.bound > claim.bound:
        return [f"bound: stated {claim.bound}, the proven bound is {analysis.bound} ({approx(analysis.bound)})"]
    return []
