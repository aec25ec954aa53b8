"""Re-running an emitted SMT-LIB2 query: the one piece of z3 the checker uses."""
from __future__ import annotations

import z3


def recheck(smt2: str, timeout_ms: int | None = None) -> str:
    """Re-run a query: "unsat" confirms the claim it encodes ("sat", "unknown" do not)."""
    s = z3.Solver()
    if timeout_ms is not None:
        s.set(timeout=timeout_ms)
    s.add(z3.parse_smt2_string(smt2))
    return str(s.check())
