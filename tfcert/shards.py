"""Verification sharded by sequence (docs/scaling.md), on Dask distributed.

Each layer maps the tokens of a sequence to tokens of that sequence, so a
replay of some sequences gives, layer by layer, the very tokens the whole
replay gives them. A shard (a list of sequence positions) replays the model
on its sequences and returns, per claim, the data its claim needs (sorted
projections, the tokens inside a window, per-token failures, maxima); the
merge computes every verdict from that data, with the kernel's own messages,
and never reads a shard's "ok". It also checks that the shards returned
partition the dataset and ran on the coordinator's parse of these file bytes
(a shard receives the parsed model, dataset and claims, pickled by Dask, and
parses nothing again).

The kernel (verify/) knows nothing of this module: ``check_certificate(..., replay=…)``
takes ``ShardedReplay`` in place of its single replay. Dask is imported only
when a cluster is asked for (``pip install 'dask[distributed]'``).
"""
from __future__ import annotations

import pickle
import re
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, fields, replace
from types import SimpleNamespace

from typing import Callable, Iterator

from tfcert.process import rare_collection
from tfcert.verify import regions
from tfcert.verify.check import KINDS, Result, _Parsed, replay_claims
from tfcert.verify.claims import Context, argmax, clusters, exact, hat, separation, snap, stated, tau_star
from tfcert.verify.claims import float as float_claim
from tfcert.verify.errors import InputError
from tfcert.verify.floats import FORMATS
from tfcert.verify.formats import Dataset
from tfcert.verify.numbers import LIMITS

INSTALL = "install the distributed extra: pip install 'dask[distributed]'"
CONNECT_TIMEOUT = 10  # seconds to reach a --scheduler before giving up


# ---------------------------------------------------------------- the split

def split(lengths: list[int], k: int) -> list[list[int]]:
    """Sequence positions in at most ``k`` non-empty shards balanced by tokens:
    the longest sequence first, each to the shard with fewest tokens so far
    (ties: the lower shard); positions sorted within a shard. Deterministic."""
    if k < 1:
        raise InputError(f"--shards {k}: expected at least 1 shard")
    shards: list[list[int]] = [[] for _ in range(min(k, len(lengths)))]
    load = [0] * len(shards)
    for j in sorted(range(len(lengths)), key=lambda j: (-lengths[j], j)):
        s = min(range(len(shards)), key=lambda s: (load[s], s))
        shards[s].append(j)
        load[s] += lengths[j]
    return [sorted(s) for s in shards]


def partition_problem(returned: list[list[int]], count: int) -> str | None:
    """Why the shards' sequences are not a partition of range(count), or None."""
    seen: dict[int, int] = {}
    for positions in returned:
        for j in positions:
            seen[j] = seen.get(j, 0) + 1
    twice = sorted(j for j, n in seen.items() if n > 1)
    missing = [j for j in range(count) if j not in seen]
    strange = sorted(j for j in seen if not 0 <= j < count)
    if twice or missing or strange:
        return (f"the shards do not partition the dataset's {count} sequences (positions in two shards: "
                f"{twice[:5]}, in none: {missing[:5]}, unknown: {strange[:5]})")
    return None


# ---------------------------------------------------------------- what a shard computes per claim

@dataclass(frozen=True)
class Part:
    """What a shard returns for one claim (a kernel check returns strings)."""
    data: object


@dataclass(frozen=True)
class _Seq:
    """The one-sequence view of a step that the per-sequence kernel checks read."""
    after: tuple
    attention: tuple | None = None


def _per_sequence(check: Callable, restrict: Callable) -> Callable:
    """A shard part that runs the kernel's own ``check`` sequence by sequence,
    on the claim restricted to that sequence: (position, failures) pairs."""
    def local(claim, ctx: Context, step, full: Context):
        out = []
        for j, pair in enumerate(ctx.dataset.pairs):
            one = Context(ctx.model, Dataset(ctx.dataset.d, (pair,)), ctx.certificate)
            att = None if getattr(step, "attention", None) is None else (step.attention[j],)
            view = _Seq((step.after[j],), att)
            out += [(full.position[pair.index], m) for m in check(restrict(claim, full.position[pair.index], att),
                                                                  one, view)]
        return Part(out)
    return local


def _argmax(claim, ctx: Context, step, full: Context):
    if step.attention is None:
        return ["the layer's attention is not a scored hardmax (identity or A = 0)"]
    ties = sum(len(a.argmax) > 1 for seq in step.attention for a in seq)

    def restrict(c, pos, att):  # ties as this sequence has them: the merge checks their sum
        return replace(c, tokens=(c.tokens[pos],), ties=sum(len(a.argmax) > 1 for a in att[0]))
    return Part((_per_sequence(argmax.check, restrict)(claim, ctx, step, full).data, ties))


def _separation(claim, ctx: Context, step, full: Context):
    return Part(separation.projections(claim.direction, step.flat_after))


def _hat(claim, ctx: Context, step, full: Context):
    """hat.tokens on the shard's tokens (None: the claim ends before its tokens)."""
    early = hat.static(claim, ctx.model.blocks[claim.block].ff)
    return Part(None if early is not None else hat.tokens(claim, ctx, step))


def _snap(claim, ctx: Context, step, full: Context):
    """snap.tokens on the shard's tokens (None: the claim ends before its tokens)."""
    early = snap.static(claim, ctx.model.blocks[claim.block].ff, ctx.model.d)
    return Part(None if early is not None else snap.tokens(claim, ctx, step))


def _tau_star(claim, ctx: Context, step, full: Context):
    """tau_star.tokens on the shard's tokens: maxima (None: not enclosed)."""
    return Part(tau_star.tokens(claim, ctx, step))


_TOKEN = re.compile(r"token \[(\d+), (\d+)\]")
_SEQUENCE = re.compile(r"sequence (\d+): ")  # a range check on one sequence's maxima
_WHERE = re.compile(r"block (\d+) (FF|SA)")


def _float_state(analysis, positions: list[int]) -> tuple:
    """A finished float analysis of a shard as (failure, uncertain, bound),
    the analysis's sequence positions in its messages made the dataset's."""
    def glob(text: str | None) -> str | None:
        if text is None:
            return None
        text = _SEQUENCE.sub(lambda m: f"sequence {positions[int(m[1])]}: ", text)
        return _TOKEN.sub(lambda m: f"token [{positions[int(m[1])]}, {m[2]}]", text)
    analysis.finish()
    failure = analysis.failure
    if failure is not None and analysis.uncertain:
        failure = failure.removesuffix(f" (the first ReLU a float run may switch: {analysis.uncertain})")
    return glob(failure), glob(analysis.uncertain), analysis.bound


def _order(text: str) -> tuple:
    """Where in the replay a float message arises: block, layer, then a layer's range checks
    (by sequence) before its tokens — one process's order."""
    where, sequence, token = _WHERE.match(text), _SEQUENCE.search(text), _TOKEN.search(text)
    return ((int(where[1]), where[2] == "SA") if where else (-1, False),
            (0, int(sequence[1]), 0) if sequence else (1, int(token[1]), int(token[2])) if token
            else (2, float("inf"), 0))


def merge_float(states: list[tuple]) -> SimpleNamespace:
    """The whole analysis from the shards': the earliest failure (with the
    earliest uncertain ReLU), else the max of the bounds."""
    failures = [s[0] for s in states if s[0] is not None]
    if not failures:
        return SimpleNamespace(failure=None, bound=max(s[2] for s in states))
    failure = min(failures, key=_order)
    uncertain = min((s[1] for s in states if s[1] is not None), key=_order, default=None)
    if uncertain is not None and _order(uncertain) <= _order(failure):
        failure += f" (the first ReLU a float run may switch: {uncertain})"
    return SimpleNamespace(failure=failure, bound=None)


class _Local:
    """A claim module as a shard runs it: replay_claims schedules it at the
    module's layer; its check returns the shard's Part."""

    def __init__(self, module, local: Callable, full: Context, positions: list[int]):
        self.KIND, self.LAYER, self.ENCLOSURES, self.BELOW = module.KIND, module.LAYER, module.ENCLOSURES, module.BELOW
        self.module, self.local, self.full, self.positions = module, local, full, positions

    def observer(self, claim, ctx):
        return self.module.observer(claim, ctx)

    def check(self, claim, ctx, step) -> list:
        if self.LAYER == "trace":
            return [Part(_float_state(step, self.positions))]
        out = self.local(claim, ctx, step, self.full)
        return out if isinstance(out, list) else [out]


LOCAL: dict[str, Callable | None] = {
    separation.KIND: _separation, hat.KIND: _hat, snap.KIND: _snap, argmax.KIND: _argmax,
    clusters.KIND: _per_sequence(clusters.check, lambda c, pos, att: replace(c, distinct=(c.distinct[pos],))),
    exact.KIND: _per_sequence(exact.check, lambda c, pos, att: c),
    tau_star.KIND: _tau_star, float_claim.KIND: None,
}


# ---------------------------------------------------------------- the worker

def verify_shard(job: dict, positions: list[int], limits: dict, observe: list[tuple[str, object]]) -> dict:
    """One shard, on a worker: replay the model on the sequences at
    ``positions`` and return per claim its Part or the kernel's failures.
    ``job`` is the coordinator's parse (the model, the dataset, the
    certificate's top-level fields, the replayed claims as (phase, kind,
    claim, where), the files' sha256s, echoed for the merge); ``observe``
    asks for float analyses (format name, give_up_above) beside the replay,
    as construct's own verification does."""
    for name, value in limits.items():
        setattr(LIMITS, name, value)
    model, dataset, top = job["model"], job["dataset"], job["top"]
    full = Context(model, dataset, top)
    mine = Context(model, Dataset(dataset.d, tuple(dataset.pairs[j] for j in positions)), top)
    items = [_Parsed(phase, _Local(KINDS[kind], LOCAL[kind], full, positions), claim, where)
             for phase, kind, claim, where in job["claims"]]
    inputs = [p.input for p in mine.dataset.pairs]
    analyses = [float_claim.Analysis(model, inputs, FORMATS[fmt], above) for fmt, above in observe]
    start = time.perf_counter()
    with rare_collection():  # a worker's process is Dask's: set for the shard alone
        results = replay_claims(mine, items, observers=tuple(analyses))
    out = [("part", r.failures[0].data) if len(r.failures) == 1 and isinstance(r.failures[0], Part)
           else ("failures", [f for f in r.failures if isinstance(f, str)]) for r in results]
    return {"positions": list(positions), "sha256": dict(job["sha256"]),
            "claims": out, "observers": [_float_state(a, positions) for a in analyses],
            "seconds": time.perf_counter() - start}


def _verify_pickled(job: bytes, *args) -> bytes:
    """verify_shard on a pickled job, its result pickled: Dask's serialisation walks
    nested containers value by value (0.8 s to scatter the parse of N = 1000,
    docs/results/shards-N1000.txt), one pickle is one buffer (about 0.3 s, pickling included)."""
    return pickle.dumps(verify_shard(pickle.loads(job), *args), protocol=5)


# ---------------------------------------------------------------- the merge

def _merge_separation(item, ctx: Context, parts: list) -> list[str]:
    """The kernel's check on the merged projections, as points on a line."""
    line = (tuple((v,) for part in parts for v in part),)
    return separation.check(replace(item.claim, direction=(1,)), ctx, _Seq(line))


def _merge_hat(item, ctx: Context, parts: list) -> list[str]:
    """hat.verdict on the union of the shards' tokens: the nearest projections
    outside the window are the nearest of the shards'."""
    claim, ff = item.claim, ctx.model.blocks[item.claim.block].ff
    early = hat.static(claim, ff)
    if early is not None:
        return early
    inside = set().union(*(p[0] for p in parts))
    below = max((p[1] for p in parts if p[1] is not None), default=None)
    above = min((p[2] for p in parts if p[2] is not None), default=None)
    return hat.verdict(claim, ff, inside, below, above, [t for p in parts for t in p[3]])


def _merge_snap(item, ctx: Context, parts: list) -> list[str]:
    """snap.verdict on the union of the shards' tokens; the whole step is exact iff every shard's is."""
    claim, ff = item.claim, ctx.model.blocks[item.claim.block].ff
    early = snap.static(claim, ff, ctx.model.d)
    if early is not None:
        return early
    return snap.verdict(claim, ff, all(p[0] for p in parts), set().union(*(p[1] for p in parts)),
                        [t for p in parts for t in p[2]], [t for p in parts for t in p[3]])


def _merge_sequences(item, ctx: Context, parts: list) -> list[str]:
    return [m for _, m in sorted((t for p in parts for t in p), key=lambda t: t[0])]


def _merge_argmax(item, ctx: Context, parts: list) -> list[str]:
    failures = _merge_sequences(item, ctx, [p[0] for p in parts])
    ties = sum(p[1] for p in parts)
    return failures + ([] if ties == item.claim.ties else [stated("ties", item.claim.ties, ties)])


def _merged_maxima(parts: list) -> tau_star.Maxima | None:
    """The whole dataset's maxima from its shards' (every shard asks the same claim)."""
    if not parts or None in parts:
        return None
    first, cfs = parts[0], [p.closed_form for p in parts]
    return tau_star.Maxima(max(p.worst for p in parts), any(p.noisy for p in parts),
                           None if first.above_step is None else max(p.above_step for p in parts),
                           any(p.constrained for p in parts),
                           None if first.closed_form is None else (max(c[0] for c in cfs), max(c[1] for c in cfs)))


def _merge_tau_star(item, ctx: Context, parts: list) -> list[str]:
    """tau_star.verdict on the maxima over the shards."""
    return tau_star.static(item.claim, ctx) or tau_star.verdict(item.claim, _merged_maxima(parts))


def _merge_float(item, ctx: Context, parts: list) -> list[str]:
    return float_claim.check(item.claim, ctx, merge_float(parts))


MERGE = {separation.KIND: _merge_separation, hat.KIND: _merge_hat, snap.KIND: _merge_snap,
         argmax.KIND: _merge_argmax, clusters.KIND: _merge_sequences, exact.KIND: _merge_sequences,
         tau_star.KIND: _merge_tau_star, float_claim.KIND: _merge_float}


def _static_result(item, ctx: Context) -> Result:
    """A claim of the model alone (LAYER None), checked once, here."""
    start = time.perf_counter()
    regions.ASKING = item
    try:
        failures = tuple(item.module.check(item.claim, ctx, None))
    except ArithmeticError as exc:
        failures = (f"not checked: {exc}",)
    return Result(item.phase, item.module.KIND, item.block, item.where, failures, time.perf_counter() - start)


def merge(ctx: Context, claims: list, shards: list[dict], expected: list[list[int]],
          sha256: dict[str, str]) -> list[Result]:
    """Every claim's Result, in certificate order, from the shards' returns:
    the replayed claims only if the shards partition the dataset and ran on
    the coordinator's parse; a shard's failures for a claim (a refusal the
    kernel gives at a layer) stand for that claim, once each."""
    problem = partition_problem([s["positions"] for s in shards], len(ctx.dataset.pairs))
    if problem is None and sorted(map(sorted, expected)) != sorted(sorted(s["positions"]) for s in shards):
        problem = "the shards returned are not the shards sent"
    wrong = sorted({slot for s in shards for slot, h in s["sha256"].items() if sha256.get(slot) != h})
    if problem is None and wrong:
        problem = f"a shard ran on another parse of the {', '.join(wrong)} than the coordinator's"
    seconds = max((s["seconds"] for s in shards), default=0.0)
    out, n = [], 0
    for item in claims:
        if item.module.KIND not in LOCAL:
            out.append(_static_result(item, ctx))
            continue
        answers = [s["claims"][n] if n < len(s["claims"]) else ("failures", ["the shard returned no result"])
                   for s in shards]
        n += 1
        start = time.perf_counter()
        if problem is not None:
            failures = [f"not checked: {problem}"]
        elif any(kind == "failures" for kind, _ in answers):
            failures = list(dict.fromkeys(f for kind, fs in answers if kind == "failures" for f in fs))
        else:
            regions.ASKING = item
            try:
                failures = MERGE[item.module.KIND](item, ctx, [data for _, data in answers])
            except ArithmeticError as exc:
                failures = [f"not checked: {exc}"]
        out.append(Result(item.phase, item.module.KIND, item.block, item.where, tuple(failures),
                          seconds + time.perf_counter() - start))
    return out


# ---------------------------------------------------------------- running the shards

Runner = Callable[[list[tuple]], Iterator[dict]]  # (verify_shard's arguments per shard) -> results as they end


@contextmanager
def in_process(workers: int) -> Iterator[Runner]:
    """Run the shards one after another here (tests, bench): the same split and merge as on a cluster."""
    yield lambda tasks: (verify_shard(*args) for args in tasks)


def _dask():
    try:
        from dask import distributed
    except ImportError:
        raise InputError(f"--shards and --scheduler need Dask: {INSTALL}") from None
    return distributed


def _new_cluster(workers: int):
    """dashboard_address ":0": the scheduler's HTTP server on a free port (None means 8787, and a
    warning on stderr where that port is taken, by another cluster say). The workers do not
    profile: sampling the running shard's stack every 10 ms made it 4 % slower (each nanny
    hands its worker the configuration it was created under)."""
    import logging

    import dask

    with dask.config.set({"distributed.worker.profile.enabled": False}):
        return _dask().LocalCluster(n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=":0",
                                    silence_logs=logging.CRITICAL)


class Booting:
    """A connect function whose LocalCluster of ``workers`` processes starts booting at once,
    in a thread: its workers start (about 0.6 s) while the coordinator reads and parses the
    files, instead of after. ``close()`` shuts it down where no shard ran (a bad input ends
    the command first); a failed start is raised where the cluster is asked for."""

    def __init__(self, workers: int):
        self._cluster, self._error = None, None
        self._thread = threading.Thread(target=self._boot, args=(workers,), daemon=True)
        self._thread.start()

    def _boot(self, workers: int) -> None:
        try:
            self._cluster = _new_cluster(workers)
        except BaseException as exc:  # raised again in the coordinator's thread, where it is asked for
            self._error = exc

    @contextmanager
    def __call__(self, workers: int) -> Iterator[Runner]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        cluster, self._cluster = self._cluster, None
        with _dask_runner(cluster.scheduler_address, cluster) as run:
            yield run

    def close(self) -> None:
        self._thread.join()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def scheduler(address: str):
    """A connect function: the existing Dask cluster whose scheduler is at ``address``."""
    return lambda workers: _dask_runner(address)


def workers_of(address: str) -> int:
    """How many workers the cluster at ``address`` has (one shard each when --shards is not given)."""
    with _client(address) as client:
        return max(1, len(client.scheduler_info()["workers"]))


@contextmanager
def _client(address: str):
    distributed = _dask()
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"--scheduler {address}: cannot reach the Dask scheduler within "
                         f"{CONNECT_TIMEOUT}s ({type(exc).__name__}: {exc})") from None
    try:
        yield client
    finally:
        client.close()


@contextmanager
def _dask_runner(address: str, cluster=None) -> Iterator[Runner]:
    """Shards run on the cluster whose scheduler is at ``address`` (``cluster``: a
    LocalCluster of this process, closed at the end)."""
    distributed = _dask()
    try:
        with _client(address) as client:
            def run(tasks: list[tuple]) -> Iterator[dict]:
                job = client.scatter(pickle.dumps(tasks[0][0], protocol=5), broadcast=True)  # each worker gets it once
                futures = [client.submit(_verify_pickled, job, *args[1:], pure=False) for args in tasks]
                for future in distributed.as_completed(futures):
                    yield pickle.loads(future.result())
            yield run
    finally:
        if cluster is not None:
            cluster.close()


@dataclass
class ShardedReplay:
    """``check_certificate(..., replay=ShardedReplay(connect, k))``: the replayed claims
    checked by at most ``k`` shards (one per sequence at most) on the Runner
    that ``connect(shards)`` opens, and merged here; ``progress(done, total,
    label)`` hears the shards as they end."""
    connect: Callable[[int], object]
    k: int
    progress: Callable | None = None
    shards: int = 0  # how many were used

    def __enter__(self) -> ShardedReplay:
        return self

    def __exit__(self, *exc) -> None:
        """Shut down a cluster booted for shards that never ran (Booting)."""
        if isinstance(self.connect, Booting):
            self.connect.close()

    def __call__(self, ctx: Context, claims: list, progress, observers: tuple, documents: tuple) -> list[Result]:
        docs = dict(zip(("model", "dataset", "certificate"), documents))
        positions = split([len(p.input) for p in ctx.dataset.pairs], self.k)
        self.shards = len(positions)
        # construct's analyses, but for those that already failed on its probe (construct/build.py)
        analyses = [a for a in observers if isinstance(a, float_claim.Analysis) and a.failure is None]
        observe = [(a.fmt.name, a.give_up_above) for a in analyses]
        limits = {f.name: getattr(LIMITS, f.name) for f in fields(LIMITS)}
        sha256 = {slot: d.sha256 for slot, d in docs.items()}
        job = {"model": ctx.model, "dataset": ctx.dataset, "sha256": sha256,
               "top": {k: v for k, v in ctx.certificate.items() if k != "phases"},  # the claims are parsed
               "claims": [(c.phase, c.module.KIND, c.claim, c.where) for c in claims if c.module.KIND in LOCAL]}
        tasks = [(job, p, limits, observe) for p in positions]
        label = f"{len(tasks)} shards by sequence, done"
        returned = []
        if self.progress:
            self.progress(0, len(tasks), label)
        with self.connect(len(tasks)) as run:
            for result in run(tasks):
                returned.append(result)
                if self.progress:
                    self.progress(len(returned), len(tasks), label)
        results = merge(ctx, claims, returned, positions, sha256)
        for i, analysis in enumerate(analyses):  # construct states its float claims from these
            whole = merge_float([r["observers"][i] for r in returned])
            analysis.failure = whole.failure
            analysis.err = [] if whole.bound is None else [(int(whole.bound.p) / int(whole.bound.q),)]  # a binary64 number: exact
        return results


# ---------------------------------------------------------------- the command line

def from_options(shards: int | None, address: str | None, progress=None):
    """The replay that --shards/--scheduler ask for, as a context manager (None: one
    process, no Dask). A local cluster starts booting here, before the files are parsed."""
    if shards is None and address is None:
        return nullcontext()
    if shards is not None and shards < 1:
        raise InputError(f"--shards {shards}: expected at least 1 shard")
    _dask()
    if address is None:
        return ShardedReplay(Booting(shards), shards, progress)
    return ShardedReplay(scheduler(address), shards or workers_of(address), progress)
