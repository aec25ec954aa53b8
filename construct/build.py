"""The construction pipeline: compress → bump → separation → leaders →
collapse → interpolation, each phase contributing blocks and claims, assembled into a
model and a certificate whose final phase also bounds the model's float runs."""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.canonical import dumps
from tfcert.construct.certificate import certificate as write_certificate
from tfcert.construct.collapse import collapse
from tfcert.construct.compress import compress
from tfcert.construct.leaders import leader_phase
from tfcert.construct.phase import Phase
from tfcert.construct.separation import separation
from tfcert.construct.snap import UNITS, snap_phase
from tfcert.construct.temperature import tau_star_claim
from tfcert.errors import InputError
from tfcert.verify.evaluate import Replay
from tfcert.verify.float_analysis import Analysis
from tfcert.verify.claims.size import THEOREM, measure
from tfcert.verify.shortcuts import distinct_sorted
from tfcert.verify.floats import FORMATS
from tfcert.verify.formats import Dataset, Model, model_json


@dataclass(frozen=True)
class Construction:
    model: Model
    phases: tuple[Phase, ...]
    theorem: str


def construct(dataset: Dataset, attention: str = "hardmax", width: int = 4, progress=None,
              share: int = 0, spaced: bool = False) -> Construction:
    """Build a transformer that maps each input set of ``dataset`` exactly onto
    its output set. ``width`` bounds the FF width: ⌊width/4⌋ leader hats or
    snaps per layer (bump hats one per layer). ``progress(done, total, label)``
    hears which phase is being built. ``share``: softmax's τ* keeps its noise
    within 2^-share of the radius left around the codes (temperature.tau_star_claim).
    ``spaced``: the separation prefers a mean shift of an exact t spaced for binary16
    (separation._ranking)."""
    if width < UNITS:
        raise InputError(f"width={width} is too small; a leader hat or a snap needs {UNITS} units")
    per_layer = width // UNITS
    step = _phases(progress, attention)
    step("separation")
    squeezed = compress(dataset, attention)
    bump, sep = separation(dataset, attention, squeezed, spaced)
    step("leaders")
    lead = leader_phase(dataset, sep, per_layer, attention, lowered=share > 0)
    step("collapse")
    tau_star = None
    if attention == "softmax":
        step("tau*")
        tau_star = tau_star_claim(dataset, lead, share)
    coll = collapse(dataset, lead, tau_star)
    step("interpolation")
    interp = snap_phase(dataset, coll, lead.leaders, per_layer)
    if any(distinct_sorted(s) != distinct_sorted(p.output) for s, p in zip(interp.tokens, dataset.pairs)):
        raise AssertionError("construction does not interpolate")  # a bug, caught before any file is written
    phases = ((squeezed,) if squeezed.blocks else ()) + (bump, sep, lead, coll, interp)  # compression only where used
    blocks = tuple(b for p in phases for b in p.blocks)
    return Construction(Model(dataset.d, attention, blocks, coll.temperature), phases, THEOREM[attention])


def _phases(progress, attention: str):
    """``step(name)``: tell ``progress`` the phase now built and how many came before."""
    names = ["separation", "leaders", "collapse"]
    names += ["tau*"] if attention == "softmax" else []
    names += ["interpolation"]

    def step(name: str) -> None:
        if progress:
            progress(names.index(name), len(names), f"building: {name}")
    return step


PROBE = 4096  # tokens: above this, each format is first analysed on a share of the sequences and blocks
PROBES = ((256, 16), (64, 64), (16, 256))  # stages: (k, least) = the first sequences holding 1/k of the
# tokens, through 1/k of the blocks (at least ``least``); each stage analyses the formats the last left
WHOLE = ("binary64",)  # analysed on the whole at once: it holds on every dataset measured, where a probe is waste


def float_analyses(model: Model, dataset: Dataset) -> list[Analysis]:
    """One float analysis per format, to be fed the verifier's own replay of
    the model (bundle.build): each that stays useful — no error bound ever
    above 1 + max|y|, beyond which a float run may land anywhere among the
    targets — gives a ``float`` claim.

    On a dataset of more than PROBE tokens the formats are first analysed in
    the stages of PROBES, each on the first sequences holding a share of the
    tokens (unless those are all of them: one long sequence), through the
    same share of the blocks, and a format that fails in a stage is not
    analysed again: it fails on the whole (its stopped analysis is returned,
    and ignores the replay). A token's bound depends on its own sequence
    alone and a range check on the tokens' maxima, which the whole only
    raises, so the whole fails too, at that block or before. The narrow
    formats mostly fail in the first blocks, where every token is analysed
    and carries an error, and cost more than the binary64 claim's whole
    analysis before they do: at N = 1000 sequences of 64 tokens binary16 and
    bfloat16 fail in the first stage (0.2 s), where a 16th of the tokens
    took 2 s. A format that survives the stages costs them little more, and
    binary64, which survives them on every dataset measured, skips them (WHOLE)."""
    inputs = [p.input for p in dataset.pairs]
    useful = 1 + max(abs(v) for p in dataset.pairs for y in p.output for v in y)
    tokens = sum(map(len, inputs))
    stopped: dict[str, Analysis] = {}
    for share, least in PROBES if tokens > PROBE else ():
        probe = _first(inputs, tokens // share)
        left = [fmt for fmt in FORMATS.values() if fmt.name not in stopped and fmt.name not in WHOLE]
        if left and len(probe) < len(inputs):
            blocks = max(len(model.blocks) // share, least)
            stopped |= {a.fmt.name: a for a in _analysed(model, probe, left, useful, blocks) if a.failure is not None}
    return [stopped[fmt.name] if fmt.name in stopped else Analysis(model, inputs, fmt, give_up_above=useful)
            for fmt in FORMATS.values()]


def _first(inputs: list, tokens: int) -> list:
    """The first sequences holding at least ``tokens`` tokens."""
    held = 0
    for n, seq in enumerate(inputs):
        held += len(seq)
        if held >= tokens:
            return inputs[:n + 1]
    return inputs


def _analysed(model: Model, inputs: list, formats: list, useful: fmpq, blocks: int) -> list[Analysis]:
    """The formats' analyses of the model on ``inputs`` along one replay, through its first ``blocks``."""
    analyses = [Analysis(model, inputs, fmt, give_up_above=useful) for fmt in formats]
    for step in Replay(model, inputs).steps():
        if step.block >= blocks or all(a.failure is not None for a in analyses):
            break
        for analysis in analyses:
            analysis.step(step)
    return analyses


def float_bounds(analyses: list[Analysis]) -> list[tuple[str, fmpq | None]]:
    """(format, bound) of each analysis once it has seen every step; the
    bound exactly as the verifier recomputes it, None where it proves none."""
    for analysis in analyses:
        analysis.finish()
    return [(analysis.fmt.name, analysis.bound) for analysis in analyses]


def certificate(construction: Construction, dataset: Dataset, model_bytes: bytes, dataset_bytes: bytes,
                floats: list[tuple[str, fmpq | None]]) -> dict:
    """The certificate for a construction, bound to the exact file bytes:
    its phases, then a final one over the whole model with the exact, size
    and float claims (``floats``: float_bounds)."""
    model = construction.model
    phases = [(p.name, p.span, p.claims) for p in construction.phases] + [("final", (0, len(model.blocks)), ())]
    return write_certificate(model_bytes, dataset_bytes, model.attention, phases,
                             measure(model, dataset, construction.theorem), floats, model.temperature)


def model_bytes(model: Model) -> bytes:
    return dumps(model_json(model))
