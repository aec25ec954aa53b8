"""The predictions of INFOFLOW.md, computed (not transcribed) by the search."""
from __future__ import annotations

from tfcert.infoflow.architecture import Architecture
from tfcert.infoflow.search import min_heads, predict
from tfcert.infoflow.targets import builtin_target

TABLE_T = (8, 16, 64)


def _exponents(spec: str, heads: tuple[int, ...], d: int = 1, E: int = 1) -> dict:
    preds = [predict(builtin_target(spec), Architecture(T, d, E, heads)) for T in TABLE_T]
    return {"values": {str(T): str(p.exponent) for T, p in zip(TABLE_T, preds)},
            "efficient": all(p.efficient for p in preds),
            "formula": preds[0].witness.dominant.to_json(TABLE_T[0])["formula"]}


def predictions_table() -> list[dict]:
    """One row per prediction and architecture; ``expected`` is the seed's claim."""
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
    return rows
