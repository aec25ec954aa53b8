"""The one certificate writer, for construct and audit alike: a certificate
bound to the exact bytes of its model and dataset files, whose last phase
spans the whole model and ends with the claims every certificate makes:
exactness, size, and each float bound proven."""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from flint import fmpq

from tfcert.verify.layers import Attention
from tfcert.verify.formats import CERTIFICATE_FORMAT

PhaseClaims = tuple[str, tuple[int, int], Sequence[dict]]  # name, block range, claims


def certificate(model_bytes: bytes, dataset_bytes: bytes, attention: str, phases: Sequence[PhaseClaims],
                size: dict, floats: Iterable[tuple[str, fmpq | None]] = (), tau_star: fmpq | None = None) -> dict:
    """The certificate's value: ``phases`` in order, the last one followed by
    the exact claim, ``size`` (the size claim; its theorem is the
    certificate's) and a float claim per (format, bound) of ``floats`` whose
    bound is not None; ``tau_star`` when the model is softmax at τ*."""
    *earlier, (name, span, claims) = phases
    final = [*claims, {"kind": "exact"}, {"kind": "size", **size},
             *({"kind": "float", "format": fmt, "bound": str(bound)} for fmt, bound in floats if bound is not None)]
    top = {"format": CERTIFICATE_FORMAT,
           "model_sha256": hashlib.sha256(model_bytes).hexdigest(),
           "dataset_sha256": hashlib.sha256(dataset_bytes).hexdigest(),
           "attention": attention, "theorem": size["theorem"]}
    if tau_star is not None:
        top["tau_star"] = str(tau_star)  # exact: every 0 < τ ≤ tau_star (the tau_star claim)
    return {**top, "phases": [_phase(*p) for p in earlier] + [_phase(name, span, final)]}


def argmax_claim(block: int, table: Iterable[Iterable[Attention]]) -> dict:
    """The argmax claim of a hardmax layer: every token's argmax set and gap, sequence by sequence."""
    tokens = [[[list(a.argmax), None if a.gap is None else str(a.gap)] for a in row] for row in table]
    ties = sum(len(a[0]) > 1 for row in tokens for a in row)
    return {"kind": "argmax", "block": block, "ties": ties, "tokens": tokens}


def _phase(name: str, span: tuple[int, int], claims: Sequence[dict]) -> dict:
    return {"name": name, "blocks": list(span), "claims": list(claims)}
