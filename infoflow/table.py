"""The paper's predictions (arXiv 2605.17930), computed (not transcribed) by the search."""
from __future__ import annotations

from tfcert.infoflow.architecture import Architecture
from tfcert.infoflow.search import min_heads, predict
from tfcert.infoflow.targets import Reduce, Score, Target, builtin_target

TABLE_T = (8, 16, 64)
FIRST_TOKEN = Target("max_t f(t, @1)", tree=Reduce("max", ("t",), Score("f", ("t", 1))))


def _exponents(spec: str | Target, heads: tuple[int, ...], d: int = 1, E: int = 1,
               positional: bool = False) -> dict:
    target = spec if isinstance(spec, Target) else builtin_target(spec)
    preds = [predict(target, Architecture(T, d, E, heads, positional)) for T in TABLE_T]
    return {"values": {str(T): "-" if p.exponent is None else str(p.exponent)
                       for T, p in zip(TABLE_T, preds)},
            "efficient": all(p.efficient for p in preds),
            "formula": None if preds[0].witness is None
            else preds[0].witness.dominant.to_json(TABLE_T[0])["formula"]}


def predictions_table() -> list[dict]:
    """One row per prediction and architecture; ``expected`` is the paper's claim."""
    rows = [
        {"prediction": "1 depth separation", "target": "pairwise-min", "architecture": "L=1, h=(1)",
         "expected": "exponent grows linearly in T", **_exponents("pairwise-min", (1,))},
        {"prediction": "1 depth separation", "target": "pairwise-min",
         "architecture": "L=2, h=(1,1)", "expected": "O(eps^-1): exponent 1 for every T",
         **_exponents("pairwise-min", (1, 1))},
        {"prediction": "2 Theorem 2", "target": "kth-largest:k=2", "architecture": "L=1, h=(1)",
         "expected": "(T-k-1)/(n+1)", **_exponents("kth-largest:k=2", (1,))},
        {"prediction": "2 Theorem 3", "target": "pairwise-min", "architecture": "L=1, h=(1), d=2, E=4",
         "expected": "T0*d/E - 1 with T0 = T", **_exponents("pairwise-min", (1,), 2, 4)},
    ]
    for D in range(2, 7):
        found = [min_heads(builtin_target(f"intrinsic-dim:D={D}"), T, 2) for T in TABLE_T]
        rows.append({"prediction": "3 intrinsic dimension", "target": f"intrinsic-dim:D={D}",
                     "architecture": "L=2, least (h1,h2)", "expected": f"h1 >= {D}",
                     "values": {str(T): ",".join(map(str, m.min_heads)) for T, m in zip(TABLE_T, found)},
                     "efficient": all(m.witness is not None for m in found),
                     "formula": "least heads per layer"})
    for heads, E in (((3, 3), 1), ((6, 6, 6), 8)):
        rows.append({"prediction": "4 comparison order 3", "target": "triangle-center",
                     "architecture": f"L={len(heads)}, h={heads}, E={E}",
                     "expected": "never efficient", **_exponents("triangle-center", heads, 1, E)})
    for heads in ((1, 1), (1, 1, 1)):
        rows.append({"prediction": "5 tree of depth k", "target": "alternation:k=3",
                     "architecture": f"L={len(heads)}, h=({','.join(map(str, heads))})",
                     "expected": "T*d/E - 1 below depth 3, O(eps^-1) from depth 3 on",
                     **_exponents("alternation:k=3", heads)})
    for positional in (False, True):
        rows.append({"prediction": "6 fixed position", "target": FIRST_TOKEN.name,
                     "architecture": "L=2, h=(1,1)" + (", positional" if positional else ""),
                     "expected": "O(eps^-1) with positional encoding, unreachable without",
                     **_exponents(FIRST_TOKEN, (1, 1), positional=positional)})
    return rows
