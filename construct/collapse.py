"""Phase 3, collapse: the SA of the last leader block (the leader phase
builds it: leaders.collapse_sa), with ρ = 0, A = the identity on the
circle's plane (coordinates up and side) and V = e_up e_sideᵀ: every
token becomes (0, code, 0, …), the side value of the token it attends to —
which the float run copies exactly too.

Scores are ⟨x_i, x_l⟩ on that plane. A token that is not a leader sits at
up = 1 (side = 0, or its small t when d = 2): its best score is with the
sequence's P leader, whose angle is the smallest (R·cos θ, against ≤ 1.01
for other non-leaders). A leader on the circle of radius R scores R² with
itself and R²·cos(angle between) with the other leaders of its sequence —
at least 0.6/m_max radians apart — so each leader attends to itself. The
construction checks both, exactly, and the certificate states every
token's argmax and gap."""
from __future__ import annotations

from flint import fmpq

from tfcert.construct.certificate import argmax_claim
from tfcert.construct.phase import Phase, frozen
from tfcert.verify.layers import apply_sa_hardmax
from tfcert.verify.shortcuts import attention_table
from tfcert.verify.formats import Dataset
from tfcert.verify.numbers import each_once, key


def collapse(dataset: Dataset, lead: Phase, tau_star: tuple[fmpq, dict] | None = None) -> Phase:
    """The collapse phase: no blocks of its own, the claims on the SA of the
    leader phase's last block (every token's argmax and gap; then m_j
    clusters per sequence, or, under softmax, which leaves clusters of nearby,
    not equal, tokens, the tau_star claim of ``tau_star`` = (τ*, claim)) and
    the tokens after it, the hardmax outputs."""
    block, sa = lead.span[1] - 1, lead.blocks[-1].sa
    table = [attention_table(sa.A, X) for X in lead.tokens]
    after = [apply_sa_hardmax(sa, X, att) for X, att in zip(lead.tokens, table)]
    argmax = argmax_claim(block, table)
    distinct = [len({key(x) for x in each_once(s)}) for s in after]  # an argmax set's tokens share one tuple
    if argmax["ties"] or distinct != [len(p.output) for p in dataset.pairs]:
        raise AssertionError("collapse failed: the leader placement is wrong")  # a construction bug
    if tau_star is None:
        claims, temperature = (argmax, {"kind": "clusters", "block": block, "distinct": distinct}), None
    else:
        temperature, claim = tau_star
        claims = (argmax, claim)
    return Phase("collapse", (block, block + 1), (), claims, frozen(after), temperature=temperature)
