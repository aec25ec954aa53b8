"""InfoFlow's prediction for one trained configuration, computed before any training.

The InfoFlow architecture is the trained one: T tokens in R^d, embedding dimension E, the same
heads per layer, no positional encoding.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from tfcert.infoflow import Architecture, builtin_target, min_heads, predict


def predicted(target: str, T: int, d: int, E: int, heads: tuple[int, ...]) -> dict:
    """``efficient`` (a derivation whose cost exponent is bounded in T), the least exponent at
    this T and its law, and a one-line ``text`` for the table."""
    return dict(_predicted(target, T, d, E, tuple(heads)))


def exponent(target: str, T: int, d: int, E: int, heads: tuple[int, ...]) -> Fraction:
    """InfoFlow's least cost exponent e (cost O(ε^-e)) of the architecture on the target."""
    return _prediction(target, T, d, E, tuple(heads)).exponent


@lru_cache(maxsize=None)
def _prediction(target: str, T: int, d: int, E: int, heads: tuple[int, ...]):
    return predict(builtin_target(target), Architecture(T, d, E, heads))


@lru_cache(maxsize=None)
def _predicted(target: str, T: int, d: int, E: int, heads: tuple[int, ...]) -> dict:
    p = _prediction(target, T, d, E, heads)
    if p.witness is None:
        return {"target": target, "efficient": False, "exponent": None, "law": None,
                "formula": None, "text": "unreachable: no derivation reaches the readout"}
    term = p.witness.dominant
    value = str(p.exponent)
    text = (f"efficient: exponent {value}, bounded in T" if p.efficient
            else f"not efficient: exponent grows with T ({value} at T={T})")
    return {"target": target, "efficient": p.efficient, "exponent": value, "law": term.law,
            "formula": term.formula, "text": text}


@lru_cache(maxsize=None)
def least_heads(target: str, T: int, d: int, E: int) -> tuple[int, ...] | None:
    """InfoFlow's least (h1, h2) with a T-bounded cost for a two-layer model (cached: the
    z3 search is shared by both head patterns at one D and T)."""
    return min_heads(builtin_target(target), T, layers=2, d=d, E=E).min_heads
