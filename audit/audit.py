"""Audit any model in the model format against a dataset: where and by how
much it fails to interpolate, every hardmax tie, the least argmax gap of
each attention layer, its size against the theorem bounds, and on request
the certified error bound of its float64/float32 runs.

Softmax models are replayed at one temperature with rigorous enclosures
(exact until the first scored attention layer, then arb-enclosed segments or
boxes): a sequence is exact only when every output token is certified to a
single exact point, "not certified" when some enclosure is wider. The
largest certified temperature is found by bisection on such checks.

The audit is the verifier's replay read out; its certificate states exactly
what the replay found, so ``tfcert verify`` accepts it exactly when the model
interpolates.
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from tfcert.construct.certificate import argmax_claim, certificate as write_certificate
from tfcert.errors import InputError
from tfcert.verify.check import check_compatible, follow
from tfcert.verify.claims.exact import hausdorff_squared
from tfcert.verify.float_analysis import Analysis
from tfcert.verify.claims.size import THEOREM, measure
from tfcert.verify.enclose import is_point, width
from tfcert.verify.evaluate import Replay
from tfcert.verify.layers import Attention
from tfcert.verify.floats import FORMATS
from tfcert.verify.formats import Dataset, Model, load_document, read_dataset, read_model
from tfcert.verify.numbers import ZERO


@dataclass(frozen=True)
class SequenceVerdict:
    index: int
    exact: bool
    hausdorff_squared: fmpq | None  # None: some token is not certified to a point
    width: fmpq = ZERO  # the widest output enclosure (0: every token exact)

    @property
    def verdict(self) -> str:
        return "exact" if self.exact else "FAIL" if self.hausdorff_squared is not None else "not certified"


@dataclass(frozen=True)
class AttentionLayer:
    """A scored hardmax layer: the least argmax gap and every tie."""
    block: int
    min_gap: fmpq | None
    ties: tuple[tuple[int, int], ...]  # [sequence, token]
    table: tuple[tuple[Attention, ...], ...]


@dataclass(frozen=True)
class FloatBound:
    """The bound the float analysis proves for one format, or why it proves none."""
    format: str
    bound: fmpq | None
    failure: str | None


@dataclass(frozen=True)
class AuditReport:
    sequences: tuple[SequenceVerdict, ...]
    layers: tuple[AttentionLayer, ...]
    uniform_blocks: tuple[int, ...]
    size: dict
    temperature: fmpq | None = None  # softmax: the temperature audited
    largest_certified_temperature: fmpq | None = None  # softmax: by bisection
    warnings: tuple[str, ...] = ()  # the dataset's dropped duplicates
    floats: tuple[FloatBound, ...] = ()  # --float: the certified bound of each format asked for

    @property
    def interpolates(self) -> bool:
        return all(s.exact for s in self.sequences)


def verdicts(pairs, outputs) -> tuple[SequenceVerdict, ...]:
    out = []
    for p, seq in zip(pairs, outputs):
        if all(is_point(x) for x in seq):
            out.append(SequenceVerdict(p.index, set(seq) == set(p.output), hausdorff_squared(seq, p.output)))
        else:
            out.append(SequenceVerdict(p.index, False, None, max(width(x) for x in seq)))
    return tuple(out)


def failures(model: Model, dataset: Dataset, tau: fmpq, among: tuple[int, ...] | None = None) -> set[int]:
    """The positions in ``dataset.pairs`` of the sequences of ``among`` (default:
    all) whose enclosure at temperature τ does not show exact interpolation;
    all of them when no enclosure can be formed there (e.g. exp of scores far
    out of range). Sequences never meet in a replay, so a subset replays alone."""
    among = tuple(range(len(dataset.pairs))) if among is None else among
    pairs = [dataset.pairs[i] for i in among]
    replay = Replay(model, [p.input for p in pairs], temperature=tau)
    try:
        for _ in replay.steps():
            pass
    except ArithmeticError:
        return set(among)
    return {i for i, v in zip(among, verdicts(pairs, replay.sequences())) if not v.exact}


def certified_at(model: Model, dataset: Dataset, tau: fmpq) -> bool:
    """Whether the enclosure at temperature τ shows exact interpolation."""
    return not failures(model, dataset, tau)


def largest_certified_temperature(model: Model, dataset: Dataset, start: fmpq, steps: int = 16, reach: int = 40,
                                  progress=None, failing_at_start: set[int] | None = None) -> fmpq | None:
    """The largest τ found certified: bracket by doubling or halving from
    ``start`` (at most ``reach`` times), then ``steps`` bisections, so the
    answer is within a factor 1 + 2^-steps of the edge of the certified
    region next to it. None: nothing certified down to start/2^reach.
    ``failing_at_start``: the sequences not certified at ``start``, when a
    replay there has told already. ``progress(done, total, label)`` hears of
    every replay.

    Below a τ where some sequences failed, the search replays only those
    (one failing sequence refuses a τ), so it costs a few replays of the
    dataset, not one per step. The answer is replayed on every sequence
    before it is returned; when one fails there after all, the search is
    done again replaying every sequence at every step."""
    everyone = tuple(range(len(dataset.pairs)))
    suspects = everyone  # the sequences that failed at the least failing τ tried (all while none has)
    whole: set = set()  # the τ found certified replaying every sequence
    narrow, tries = True, 0

    def certified(tau: fmpq, stage: str, total: int | None = None) -> bool:
        nonlocal tries, suspects
        if progress:
            progress(tries, total, stage)
        tries += 1
        failed = failures(model, dataset, tau, suspects)
        if not failed and suspects == everyone:
            whole.add(tau)
        if failed and narrow:
            suspects = tuple(sorted(failed))
        return not failed

    if failing_at_start is None:
        start_ok = certified(start, "bracketing tau")
    else:
        start_ok = not failing_at_start
        if failing_at_start:
            suspects = tuple(sorted(failing_at_start))
    lo = _search(certified, start, start_ok, steps, reach)
    if lo is None or lo in whole:
        return lo
    suspects, narrow, tries = everyone, False, 0
    if certified(lo, "confirming tau"):
        return lo
    tries = 0
    return _search(certified, start, start_ok, steps, reach)


def _search(certified, start: fmpq, start_ok: bool, steps: int, reach: int) -> fmpq | None:
    """Bracket from ``start`` (certified or not: ``start_ok``), then bisect,
    asking ``certified(τ, stage, total)``; None when nothing is certified
    down to start/2^reach."""
    if start_ok:
        lo = start
        for _ in range(reach):
            if not certified(2 * lo, "bracketing tau"):
                break
            lo *= 2
        else:
            return lo
        hi = 2 * lo
    else:
        hi = start
        for _ in range(reach):
            if certified(hi / 2, "bracketing tau"):
                break
            hi /= 2
        else:
            return None
        lo = hi / 2
    # the largest k < 2^steps certified at lo + k·unit; probing k = 2^(steps-4), 2^(steps-8), …
    # first (the edge is usually near lo, where few sequences fail) finds the bisection's k
    unit, b = (hi - lo) / 2**steps, 2**steps
    while (k := b >> 4) > 0 and not certified(lo + k * unit, "bisecting tau", steps):
        b = k
    a = k  # certified (lo itself when k = 0)
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if certified(lo + mid * unit, "bisecting tau", steps) else (a, mid)
    return lo + a * unit


def tightness(model: Model, dataset: Dataset, progress=None) -> tuple[fmpq, fmpq, fmpq]:
    """(τ*, τ_emp, τ*/τ_emp) for a softmax model whose temperature is its
    certified τ*: τ_emp is the largest temperature at which the rigorous
    enclosure still shows exact interpolation, so the ratio says how much
    the noise bound gives away."""
    tau_emp = largest_certified_temperature(model, dataset, model.temperature, progress=progress)
    return model.temperature, tau_emp, model.temperature / tau_emp


def audit(model: Model, dataset: Dataset, progress=None, temperature: fmpq | None = None,
          floats: tuple[str, ...] = ()) -> AuditReport:
    """Replay ``model`` on every input sequence of ``dataset``: exactly, and
    for softmax with rigorous enclosures at ``temperature`` (default: the model's).
    ``floats``: formats ("binary64", "binary32") whose float-run bound to prove
    (docs/float.md), beside the same replay."""
    softmax = model.attention == "softmax"
    if temperature is not None and not softmax:
        raise InputError("--temperature: applies to softmax models; this model is hardmax")
    if floats and temperature is not None and temperature != model.temperature:
        raise InputError("--float: a float run uses the model's own temperature; drop --temperature")
    tau = (model.temperature if temperature is None else temperature) if softmax else None
    inputs = [p.input for p in dataset.pairs]
    analyses = [Analysis(model, inputs, FORMATS[name]) for name in floats]
    replay = Replay(model, inputs, temperature=tau)
    layers, uniform = [], []
    for step in replay.steps():
        follow(analyses, step)
        if step.layer != "sa":
            continue
        if progress:
            progress(step.block + 1, len(model.blocks), "replay")
        if step.uniform:
            uniform.append(step.block)
        if step.attention is not None:
            gaps = [a.gap for row in step.attention for a in row if a.gap is not None]
            ties = tuple((p.index, i) for p, row in zip(dataset.pairs, step.attention)
                         for i, a in enumerate(row) if len(a.argmax) > 1)
            layers.append(AttentionLayer(step.block, min(gaps) if gaps else None, ties, step.attention))
    sequences = verdicts(dataset.pairs, replay.sequences())
    failing = {i for i, v in enumerate(sequences) if not v.exact}
    largest = largest_certified_temperature(model, dataset, tau, progress=progress,
                                            failing_at_start=failing) if softmax else None
    for analysis in analyses:
        analysis.finish()
    bounds = tuple(FloatBound(a.fmt.name, a.bound, a.failure) for a in analyses)
    return AuditReport(sequences, tuple(layers), tuple(uniform),
                       measure(model, dataset, THEOREM[model.attention]), tau, largest, dataset.warnings, bounds)


def certificate(report: AuditReport, model_bytes: bytes, dataset_bytes: bytes, n_blocks: int) -> dict:
    """A certificate of what the audit found, with the exactness claim that
    ``verify`` accepts exactly when the model interpolates."""
    claims = [{"kind": "uniform_attention", "block": k} for k in report.uniform_blocks]
    claims += [argmax_claim(layer.block, layer.table) for layer in report.layers]
    return write_certificate(model_bytes, dataset_bytes, "hardmax" if report.temperature is None else "softmax",
                             [("audit", (0, n_blocks), claims)], report.size,
                             [(f.format, f.bound) for f in report.floats])


def audit_files(model_path: str, dataset_path: str, progress=None, temperature: fmpq | None = None,
                floats: tuple[str, ...] = ()):
    """Read, check compatibility and audit; returns (report, model, model doc, dataset doc)."""
    model_doc, dataset_doc = load_document(model_path), load_document(dataset_path)
    model, dataset = read_model(model_doc), read_dataset(dataset_doc)
    check_compatible(model, dataset, model_doc.path, dataset_doc.path)
    return audit(model, dataset, progress, temperature, floats), model, model_doc, dataset_doc
