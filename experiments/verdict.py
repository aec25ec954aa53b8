"""One verdict rule for every experiment: the measured trend against what the InfoFlow calculus
predicts for the exact architecture trained, and an under-trained run is never "agrees".

A *cell* is one configuration trained over seeds, with InfoFlow's least exponent for its
architecture (``prediction.exponent``: the library function behind ``tfcert infoflow predict``
at the run's d, E, heads and T). Two cells that differ in one coordinate (the heads, the depth or
T) are compared: where the calculus gives the first a smaller exponent, its NMSE must be at least
``RATIO`` times lower (every seed below every seed of the other); where it gives both the same
exponent, their NMSE must lie within ``RATIO`` of each other. A cell whose held-out NMSE (the
geometric mean over seeds) fell by more than ``FALL`` over the last interval between checkpoints
is still training: a check that involves it says nothing. An experiment may add checks of its
own kind (the cost law's fitted slope) through ``Check``.

Nothing here imports torch or z3: the cells carry their exponents.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

RATIO = 3.0  # a predicted difference: at least this factor; a predicted tie: within it
FALL = 1.1  # a cell whose NMSE fell by more than this factor (10%) over the last checkpoint interval is under-trained
AGREES, DISAGREES, INCONCLUSIVE = "agrees", "does not agree", "inconclusive"
CRITERION = (f"cells (one configuration over seeds) that differ in one coordinate are compared with InfoFlow's "
             f"least exponent e for each exact architecture (tfcert infoflow predict at its d, E, heads, T): "
             f"a smaller e must give a geometric-mean NMSE >= {RATIO:g}x lower with every seed below every seed "
             f"of the other, an equal e NMSE within {RATIO:g}x; a cell whose NMSE fell by more than {FALL:g}x "
             f"over the last checkpoint interval is under-trained. Verdict: 'does not agree' when a check "
             f"between two trained cells fails; else 'inconclusive' when a cell is under-trained or nothing "
             f"was compared; else 'agrees'")


def _geomean(values: Iterable[float]) -> float:
    values = [max(float(v), 1e-300) for v in values]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


@dataclass(frozen=True)
class Cell:
    """One configuration over seeds: its label, InfoFlow's exponent (None: no derivation reaches
    the readout, above every exponent), the final NMSE per seed and each seed's curve (held-out
    NMSE at the checkpoints)."""

    label: str
    exponent: Fraction | None
    nmse: tuple[float, ...]
    curves: tuple[tuple[float, ...], ...]

    @staticmethod
    def of(label: str, exponent: Fraction | None, records: Sequence[dict]) -> Cell:
        """From records carrying ``nmse`` and ``curve`` ([[step, nmse], …]; a record without a
        curve has only its final value, which cannot show that it stopped falling)."""
        return Cell(label, exponent, tuple(r["nmse"] for r in records),
                    tuple(tuple(v for _, v in r.get("curve", [[0, r["nmse"]]])) for r in records))

    @property
    def mean(self) -> float:
        return _geomean(self.nmse)

    def fall(self) -> float:
        """How much the geometric mean over seeds fell over the last checkpoint interval (inf
        with fewer than two checkpoints: nothing shows the curve flattened)."""
        if not self.curves or min(map(len, self.curves)) < 2:
            return math.inf
        return _geomean(c[-2] for c in self.curves) / _geomean(c[-1] for c in self.curves)

    def under_trained(self) -> bool:
        return self.fall() > FALL


@dataclass(frozen=True)
class Check:
    """One prediction against the measurement: ``holds``, and ``conclusive`` when every cell it
    involves was trained to a flat curve."""

    what: str
    predicted: str
    measured: str
    holds: bool
    conclusive: bool

    def to_json(self) -> dict:
        return {"what": self.what, "predicted": self.predicted, "measured": self.measured,
                "holds": self.holds, "conclusive": self.conclusive}


def _key(e: Fraction | None) -> float:
    return math.inf if e is None else float(e)


def compare(a: Cell, b: Cell) -> Check:
    """The calculus's prediction for two cells against their NMSE."""
    if _key(b.exponent) < _key(a.exponent):
        a, b = b, a
    ratio = b.mean / a.mean
    conclusive = not (a.under_trained() or b.under_trained())
    what = f"{a.label} (e={a.exponent}) vs {b.label} (e={b.exponent})"
    if _key(a.exponent) == _key(b.exponent):
        return Check(what, f"within {RATIO:g}x", f"{ratio:.3g}x", 1 / RATIO <= ratio <= RATIO, conclusive)
    holds = ratio >= RATIO and max(a.nmse) < min(b.nmse)
    return Check(what, f"{b.label} >= {RATIO:g}x {a.label}", f"{ratio:.3g}x", holds, conclusive)


def pairs(cells: Sequence[Cell]) -> list[Check]:
    """Every pair of ``cells`` compared (pass cells that differ in one coordinate)."""
    return [compare(a, b) for a, b in combinations(cells, 2)]


def judge(checks: Sequence[Check], cells: Sequence[Cell]) -> str:
    """The verdict: a failed check between trained cells disagrees; else an under-trained cell,
    or no check at all, leaves it inconclusive; else it agrees."""
    if any(c.conclusive and not c.holds for c in checks):
        return DISAGREES
    if not checks or any(c.under_trained() for c in cells):
        return INCONCLUSIVE
    return AGREES


def summary(checks: Sequence[Check], cells: Sequence[Cell]) -> str:
    """The verdict with its reason, for a table or a verdict line."""
    verdict = judge(checks, cells)
    failed = sum(c.conclusive and not c.holds for c in checks)
    training = [c.label for c in cells if c.under_trained()]
    reason = f"{sum(c.holds for c in checks)} of {len(checks)} checks hold"
    if failed:
        reason += f", {failed} failed between trained cells"
    if training:
        reason += f"; still falling (> {FALL:g}x over the last interval): {' / '.join(training)}"
    return f"{verdict} ({reason})"
