"""Phase 3, collapse: the SA of the last leader block, with ρ = 0,
A = the identity on the circle's plane (coordinates up and side) and
V = e_up e_sideᵀ: every token becomes (0, code, 0, …), the side value of the
token it attends to — which the float run copies exactly too.

Scores are ⟨x_i, x_l⟩ on that plane. A token that is not a leader sits at
up = 1 (side = 0, or its small t when d = 2): its best score is with the
sequence's P leader, whose angle is the smallest (R·cos θ, against ≤ 1.01
for other non-leaders). A leader on the circle of radius R scores R² with
itself and R²·cos(angle between) with the other leaders of its sequence —
at least 0.4/m_max radians apart — so each leader attends to itself. The
construction checks both, exactly, and the certificate states every
token's argmax and gap."""
from __future__ import annotations

from flint import fmpq

from tfcert.construct.leaders import UP, side, side_sign
from tfcert.verify.layers import apply_sa_hardmax
from tfcert.verify.shortcuts import attention_table
from tfcert.verify.formats import SA, Dataset, LowRank
from tfcert.verify.numbers import ONE, ZERO, Vec, key, scale, unit


def collapse_sa(d: int, gain: fmpq) -> SA:
    """V copies the side value times ``gain`` (a power of two) into up,
    negated when d = 2 (the mirrored circle) so every code is positive:
    exact products in floats too."""
    up, sd = unit(d, UP), unit(d, side(d))
    A = LowRank(ONE) if d == 2 else LowRank(ZERO, ((up, up), (sd, sd)))
    return SA(ZERO, A, LowRank(ZERO, ((up, scale(gain * side_sign(d), sd)),)))


def collapse(dataset: Dataset, seqs: list[list[Vec]], block: int, gain: fmpq) -> tuple[SA, list[dict], list[list[Vec]]]:
    """The collapse layer, its claims (every token's argmax and gap; m_j
    clusters per sequence) and the tokens after it."""
    sa = collapse_sa(dataset.d, gain)
    table, after = [], []
    for X in seqs:
        att = attention_table(sa.A, X)
        table.append([[list(a.argmax), None if a.gap is None else str(a.gap)] for a in att])
        after.append(apply_sa_hardmax(sa, X, att))
    ties = sum(len(a[0]) > 1 for row in table for a in row)
    distinct = [len({key(x) for x in s}) for s in after]
    if ties or distinct != [len(p.output) for p in dataset.pairs]:
        raise AssertionError("collapse failed: the leader placement is wrong")  # a construction bug
    claims = [{"kind": "argmax", "block": block, "ties": ties, "tokens": table},
              {"kind": "clusters", "block": block, "distinct": distinct}]
    return sa, claims, after
