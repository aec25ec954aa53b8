"""The kernel: read model, dataset and certificate; recompute every claim.

A certificate passes only if the sha256 of the exact model and dataset bytes
match, it claims exactness, and every claim recomputes. Claims that need the
replay are checked as the replay reaches their layer, so memory stays at one
copy of the tokens.
"""
from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tfcert.verify.errors import InputError
from tfcert.verify.claims import ClaimKind, Context, argmax, clusters, exact, hat, separation, size, snap, tau_star, uniform
from tfcert.verify.claims import float as float_claim
from tfcert.verify import regions
from tfcert.verify.evaluate import Replay, Step
from tfcert.verify.formats import (CERTIFICATE_FORMAT, Document, array, check_format, fields, integer, load_document,
                                   number, obj, read_dataset, read_model)
from tfcert.verify.numbers import show

KINDS: dict[str, ClaimKind] = {m.KIND: m for m in (uniform, separation, hat, argmax, clusters, exact, size, snap,
                                                     tau_star, float_claim)}
TOP = ("format", "model_sha256", "dataset_sha256", "attention", "theorem", "phases")
PHASE_NAME = re.compile(r"[A-Za-z0-9_.:/()+ -]{1,80}")  # printed in reports: no control characters


@dataclass(frozen=True)
class Result:
    """One checked claim: where it sits in the certificate and what failed."""
    phase: str
    kind: str
    block: int | None
    where: str
    failures: tuple[str, ...]
    seconds: float = field(default=0.0, compare=False)  # spent checking it (JUnit's time)

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class Report:
    results: tuple[Result, ...]
    warnings: tuple[str, ...] = ()  # the dataset's dropped duplicates

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


@dataclass(frozen=True)
class _Parsed:
    phase: str
    module: ClaimKind
    claim: object
    where: str

    @property
    def block(self) -> int | None:
        return getattr(self.claim, "block", None)


def check_compatible(model, dataset, model_name: str, dataset_name: str) -> None:
    if model.d != dataset.d:
        raise InputError(f"{model_name}: $.d: model has d = {model.d} but {dataset_name} has d = {dataset.d}")


def _parse_claims(cert: Document, ctx: Context) -> list[_Parsed]:
    name, top = cert.path, cert.value
    n_blocks = len(ctx.model.blocks)
    parsed = []
    for p, raw_phase in enumerate(array(top["phases"], f"{name}: $.phases")):
        where = f"{name}: $.phases[{p}]"
        phase = fields(raw_phase, where, ("name", "blocks", "claims"))
        if not isinstance(phase["name"], str) or not PHASE_NAME.fullmatch(phase["name"]):
            raise InputError(f"{where}.name: expected 1 to 80 letters, digits, spaces or _.:/()+-")
        span = array(phase["blocks"], f"{where}.blocks")
        if len(span) != 2:
            raise InputError(f"{where}.blocks: expected [first, end]")
        first = integer(span[0], f"{where}.blocks[0]", 0, n_blocks)
        end = integer(span[1], f"{where}.blocks[1]", first, n_blocks)
        for c, raw in enumerate(array(phase["claims"], f"{where}.claims")):
            at = f"{where}.claims[{c}]"
            kind = obj(raw, at, ("kind",))["kind"]
            if not isinstance(kind, str) or kind not in KINDS:
                raise InputError(f"{at}.kind: unknown claim kind {show(repr(kind))}")
            item = _Parsed(phase["name"], KINDS[kind], KINDS[kind].parse(raw, at, ctx), at)
            if item.block is not None and not first <= item.block < end:
                raise InputError(f"{at}.block: block {item.block} lies outside the phase's blocks [{first}, {end})")
            parsed.append(item)
    return parsed


def check_certificate(model_doc: Document, dataset_doc: Document, cert_doc: Document,
                      progress: Callable[[int, int], None] | None = None, observers: tuple = (),
                      replay=None) -> Report:
    """Check a certificate against the exact model and dataset bytes.
    ``observers`` (float analyses) see every step the float claims see, so
    a caller can state float claims from this very replay (construct).
    ``replay`` stands in for replay_claims (its arguments and the three
    documents, the same results): tfcert/shards.py checks the replayed
    claims on shards of the dataset."""
    model, dataset = read_model(model_doc), read_dataset(dataset_doc)
    check_compatible(model, dataset, model_doc.path, dataset_doc.path)
    top = obj(cert_doc.value, f"{cert_doc.path}: $", ("format",))
    check_format(top, CERTIFICATE_FORMAT, cert_doc.path)
    fields(top, f"{cert_doc.path}: $", TOP, ("tau_star",))
    if "tau_star" in top:
        number(top["tau_star"], f"{cert_doc.path}: $.tau_star")
    results = [
        Result("integrity", "model_sha256", None, f"{cert_doc.path}: $.model_sha256",
               () if top["model_sha256"] == model_doc.sha256 else
               (f"stated {show(repr(top['model_sha256']))}, file has {model_doc.sha256}",)),
        Result("integrity", "dataset_sha256", None, f"{cert_doc.path}: $.dataset_sha256",
               () if top["dataset_sha256"] == dataset_doc.sha256 else
               (f"stated {show(repr(top['dataset_sha256']))}, file has {dataset_doc.sha256}",)),
    ]
    ctx = Context(model, dataset, top)
    try:
        claims = _parse_claims(cert_doc, ctx)
    except InputError as exc:
        if all(r.ok for r in results):
            raise
        raise InputError(f"{exc} (the certificate's sha256 does not match {model_doc.path} / "
                         f"{dataset_doc.path}: is it the certificate of other files?)") from None
    results += _top_claims(cert_doc.path, top, model.attention, claims)
    results += (replay_claims(ctx, claims, progress, observers) if replay is None
                else replay(ctx, claims, progress, observers, (model_doc, dataset_doc, cert_doc)))
    return Report(tuple(results), dataset.warnings)


def _top_claims(name: str, top: dict, attention: str, claims: list[_Parsed]) -> list[Result]:
    """What the certificate as a whole states: its attention and theorem are
    the model's, it claims exactness, and a softmax one proves every
    temperature up to the model's (a tau_star claim)."""
    out = []
    if top["attention"] != attention:
        out.append(Result("integrity", "attention", None, f"{name}: $.attention",
                          (f"stated {show(repr(top['attention']))}, the model's attention is {attention}",)))
    if top["theorem"] != size.THEOREM[attention]:
        out.append(Result("integrity", "theorem", None, f"{name}: $.theorem",
                          (f"stated {show(repr(top['theorem']))}, a {attention} model is measured against Theorem "
                           f"{size.THEOREM[attention]}",)))
    if not any(c.module is exact for c in claims):
        out.append(Result("integrity", "exact", None, f"{name}: $.phases", ("the certificate makes no exactness claim",)))
    has_tau = any(c.module is tau_star for c in claims)
    if "tau_star" in top and not has_tau:
        out.append(Result("integrity", "tau_star", None, f"{name}: $.tau_star",
                          ("the certificate states tau_star but no tau_star claim proves it",)))
    elif attention == "softmax" and not has_tau:
        out.append(Result("integrity", "tau_star", None, f"{name}: $.phases",
                          ("a softmax certificate must prove exactness at every temperature up to the model's: "
                           "it has no tau_star claim",)))
    return out


def replay_claims(ctx: Context, claims: list[_Parsed], progress=None, observers: tuple = ()) -> list[Result]:
    """Check static claims, then replay the model once, checking each claim at
    its layer; results come back in the certificate's order. A claim that is
    BELOW asks the replay for enclosures valid at every temperature up to the
    model's; the trace claims' observers (and ``observers``, a caller's) then
    follow a second replay at the model's own temperature, where the float
    run happens and enclosures are tighter."""
    def run(item: _Parsed, step: Step | None) -> Result:
        if step is not None and not item.module.ENCLOSURES and not step.exact:
            return Result(item.phase, item.module.KIND, item.block, item.where,
                          (f"block {step.block} {step.layer}: tokens are enclosures, not exact points; "
                           f"a {item.module.KIND} claim cannot be checked there",))
        start = time.perf_counter()
        regions.ASKING = item
        try:
            failures = tuple(item.module.check(item.claim, ctx, step))
        except ArithmeticError as exc:  # an enclosure out of range proves nothing
            failures = (f"not checked: {exc}",)
        return Result(item.phase, item.module.KIND, item.block, item.where, failures, time.perf_counter() - start)

    done = {id(c): run(c, None) for c in claims if c.module.LAYER is None}
    at: dict[tuple, list[_Parsed]] = defaultdict(list)
    for c in claims:
        if c.module.LAYER in ("ff", "sa"):
            at[(c.block, c.module.LAYER)].append(c)
    ends = [c for c in claims if c.module.LAYER == "end"]
    below = any(c.module.BELOW for c in claims)
    inputs = [p.input for p in ctx.dataset.pairs]
    traces = {id(c): c.module.observer(c.claim, ctx) for c in claims if c.module.LAYER == "trace"}
    following = [*traces.values(), *observers]
    replay = Replay(ctx.model, inputs, below=below)
    n_blocks = len(ctx.model.blocks)
    try:
        for step in replay.steps():
            done.update((id(c), run(c, step)) for c in at.get((step.block, step.layer), ()))
            if not below:
                follow(following, step)
            if progress and step.layer == "sa":
                progress(step.block + 1, n_blocks)
        if below:
            for step in Replay(ctx.model, inputs).steps() if following else ():
                if all(o.failure is not None for o in following):
                    break  # nothing is left to prove; the enclosures' paths may only grow from here
                follow(following, step)
        final = list(replay.tokens)
        end_step = Step(n_blocks, "end", final, final, tuple(replay.lengths), exact=replay.points)
        done.update((id(c), run(c, end_step)) for c in ends)
        for o in traces.values():
            o.finish()
        done.update((id(c), run(c, traces[id(c)])) for c in claims if id(c) in traces)
    except ArithmeticError as exc:  # the replay's enclosures left the representable range
        stopped = (f"not checked: the replay stopped: {exc}",)
        done.update((id(c), Result(c.phase, c.module.KIND, c.block, c.where, stopped))
                    for c in claims if id(c) not in done)
    return [done[id(c)] for c in claims]  # in certificate order


def follow(observers, step: Step) -> None:
    """Feed one replay step to each observer (float analyses, progress):
    the one loop every caller of the replay uses."""
    for o in observers:
        o.step(step)


def verify_files(model: str | Path, dataset: str | Path, certificate: str | Path,
                 progress: Callable[[int, int], None] | None = None) -> Report:
    return check_certificate(load_document(model), load_document(dataset), load_document(certificate), progress)
