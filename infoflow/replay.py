"""``replay``: check an in-process derivation with the independent checker.

The derivation is turned into its witness document (``Derivation.to_json``, the file format)
and handed to ``tfcert.infoflow.check``, which shares no code with the search."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from tfcert.infoflow.architecture import Architecture
from tfcert.infoflow.check import check_document
from tfcert.infoflow.targets import Target
from tfcert.infoflow.witness import Derivation


@dataclass(frozen=True)
class ReplayReport:
    ok: bool
    errors: tuple[str, ...]
    exponent: Fraction | None


def replay(target: Target, arch: Architecture, w: Derivation) -> ReplayReport:
    """The witness passes when it is for this target (same normalised tree) and architecture
    and the checker accepts its document."""
    errors = []
    if w.target.calc.to_json() != target.calc.to_json() or w.arch != arch:
        errors.append("witness is for another target or architecture")
    report = check_document("<witness>", w.to_json(), proofs=False)
    errors += report.errors
    return ReplayReport(not errors, tuple(errors), report.exponent)
