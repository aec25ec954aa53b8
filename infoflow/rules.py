"""What each head use may derive, and what it costs: the calculus' rule table.

Facts per position class ("tok" = any input position t, "out" = the readout T+1):
* ``g_c(t)`` (tok only): t knows the anchored value of comparison c, best_{tuple ∋ t} of its score;
* ``c``: the position knows the value of comparison c itself;
* full information (I = {1..T}) lets a decoder compute any fact, at the Theorem 3 price for T0 = T.

Roles of a head at a class: ``anchor`` (max-retrieve the partner s of t: needs order 2, rank 1),
``resolve`` (retrieve the best holder of g_c; rank k ≥ 2 needs a k-th retrieval and order 1),
``copy`` (readout attends to a token that already holds c).
"""
from __future__ import annotations

from tfcert.infoflow.costs import CostTerm, decode_all, decode_tokens, kth_retrieval
from tfcert.infoflow.targets import Comparison

MODES = ("off", "max", "kth", "global")
ROLES = ("anchor", "resolve", "copy")
CLASSES = ("tok", "out")
ALL = "1..T"


def role_mode(role: str, cls: str, c: Comparison) -> str | None:
    """The head mode a role needs at a class, or None when the rule does not exist."""
    if role == "anchor":
        return "max" if cls == "tok" and c.order == 2 and c.rank == 1 else None
    if role == "resolve":
        if c.rank == 1:
            return "max"
        return "kth" if c.order == 1 else None
    return "max" if cls == "out" else None


def role_terms(role: str, c: Comparison, d: int, E: int) -> tuple[CostTerm, ...]:
    """Scores and decoders read only the tokens the value depends on (the extremal tuple)."""
    if role == "resolve" and c.rank > 1:
        return decode_tokens(1, d, E), kth_retrieval(c.rank, c.key_dim)
    return (decode_tokens(c.order, d, E),)


def readout_terms(c: Comparison, d: int, E: int) -> tuple[CostTerm, ...]:
    """The final decoder reads c's value, a function of its order-many extremal tokens."""
    return (decode_tokens(c.order, d, E),)


def aggregate_terms(d: int, E: int) -> tuple[CostTerm, ...]:
    """Deriving any fact from full information decodes a function of all T tokens."""
    return (decode_all(d, E),)


def anchored_fact(c: Comparison) -> str:
    return f"g_{c.name}(t)"


def initially_anchored(c: Comparison) -> bool:
    """An order-1 score is a function of t alone: t holds g_c(t) from the start."""
    return c.order == 1
