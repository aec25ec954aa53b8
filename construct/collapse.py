"""Phase 3, collapse: the SA of the last leader block, with A = I, ρ = 0 and
V = e1 e2ᵀ. Leaders on the circle of radius R ≥ 4 attend to themselves;
every non-leader (within 1/8 of e1) attends to its sequence's P leader
(scores ≥ 0.75R, versus < 0 for the other leaders and < 1.27 for
non-leaders). Each token becomes exactly code·e1."""
from __future__ import annotations

from flint import fmpq

from tfcert.verify.evaluate import apply_sa_hardmax, hardmax_attention
from tfcert.verify.formats import SA, Dataset, LowRank
from tfcert.verify.numbers import Vec, unit

ONE, ZERO = fmpq(1), fmpq(0)


def collapse_sa(d: int) -> SA:
    e1 = unit(d, 0)
    e2 = unit(d, 1)
    return SA(ZERO, LowRank(ONE), LowRank(ZERO, ((e1, e2),)))


def collapse(dataset: Dataset, seqs: list[list[Vec]], block: int) -> tuple[SA, list[dict], list[list[Vec]]]:
    """The collapse layer, its claims (every token's argmax and gap; m_j
    clusters per sequence) and the tokens after it."""
    sa = collapse_sa(dataset.d)
    table, after = [], []
    for X in seqs:
        att = [hardmax_attention(sa.A, X, i) for i in range(len(X))]
        table.append([[list(a.argmax), None if a.gap is None else str(a.gap)] for a in att])
        after.append(apply_sa_hardmax(sa, X, att))
    ties = sum(len(a[0]) > 1 for row in table for a in row)
    distinct = [len(set(s)) for s in after]
    if ties or distinct != [len(p.output) for p in dataset.pairs]:
        raise AssertionError("collapse failed: the leader placement is wrong")  # a construction bug
    claims = [{"kind": "argmax", "block": block, "ties": ties, "tokens": table},
              {"kind": "clusters", "block": block, "distinct": distinct}]
    return sa, claims, after
