"""The cost laws as exact rational exponents: a cost O(ε^{-e}) is reported as its exponent e.

Theorem 2: retrieving the k-th largest (k ≥ 2) of n-dimensional keys among T tokens costs
e = (T-k-1)/(n+1). Theorem 3: decoding a function of T0 tokens in R^d from an E-dimensional
embedding costs ε^{1 - T0·d/E}, i.e. e = T0·d/E - 1. A cost is never below a constant, so a
step's exponent is clamped at 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


def theorem2_exponent(T: int, k: int, n: int) -> Fraction:
    """Exponent of the k-th-largest retrieval lower bound Ω(ε^{-(T-k-1)/(n+1)})."""
    return Fraction(T - k - 1, n + 1)


def theorem3_exponent(T0: int, d: int, E: int) -> Fraction:
    """Exponent e of the decoding cost O(ε^{1 - T0 d/E}) = O(ε^{-e})."""
    return Fraction(T0 * d, E) - 1


@dataclass(frozen=True)
class CostTerm:
    """An exponent affine in T, ``max(0, slope·T + offset)``; ``formula`` keeps its symbols."""

    law: str
    formula: str
    where: tuple[tuple[str, int], ...]
    slope: Fraction
    offset: Fraction

    def value(self, T: int) -> Fraction:
        return max(Fraction(0), self.slope * T + self.offset)

    @property
    def grows(self) -> bool:
        """Whether the exponent is unbounded in T (the definition of "not efficient")."""
        return self.slope > 0

    def to_json(self, T: int) -> dict:
        v = self.value(T)
        return {"law": self.law, "formula": f"max(0, {self.formula})",
                "where": dict(self.where), "value": str(v),
                "float": float(v), "grows_with_T": self.grows}


def decode_tokens(T0: int, d: int, E: int) -> CostTerm:
    """Theorem 3 for a function of a fixed number T0 of tokens (independent of T)."""
    return CostTerm(f"Theorem 3, T0 = {T0}", f"{T0}*d/E - 1", (("d", d), ("E", E)),
                    Fraction(0), theorem3_exponent(T0, d, E))


def decode_all(d: int, E: int) -> CostTerm:
    """Theorem 3 for a function of all T tokens: what a global aggregate costs to decode."""
    return CostTerm("Theorem 3, T0 = T", "T*d/E - 1", (("d", d), ("E", E)),
                    Fraction(d, E), Fraction(-1))


def kth_retrieval(k: int, n: int) -> CostTerm:
    """Theorem 2 for retrieving the k-th largest of n-dimensional keys."""
    return CostTerm(f"Theorem 2, k = {k}", "(T-k-1)/(n+1)", (("k", k), ("n", n)),
                    Fraction(1, n + 1), Fraction(-k - 1, n + 1))


def worst(terms: tuple[CostTerm, ...], T: int) -> CostTerm:
    """The dominating term (first in order on ties): the one whose formula is reported."""
    return max(terms, key=lambda t: (t.value(T), t.grows))
