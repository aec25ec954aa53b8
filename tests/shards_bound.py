"""The best speed-up ``tfcert verify --shards K`` could give on a bundle (docs/scaling.md, "2 cores").

Run: ``python tests/shards_bound.py FOLDER [--limit-tokens N]``. Measures, in this process, the
parts of one verification — Python's start with tfcert's imports (a fresh interpreter), reading
the three files, parsing them and the claims, and the replayed claims (the replay, the float
analysis beside it, every claim checked at its layer) — and Dask's own cost: importing
``dask.distributed``, a LocalCluster of K worker processes booted, K trivial tasks, and its close (the CPU its workers used).
Prints one JSON line. Sharding can split only the replayed claims: every other part stays with the
coordinator, so K shards take at least start + read + parse + replayed/K (Amdahl's law), and Dask
adds at least its import and its close on the coordinator's path (without the distributed extra,
only the first bound is printed). ``best_speedup_K`` is one
process's time over that floor with every other overhead (the scatter, the per-block work each
shard repeats, the merge) counted as 0; ``overhead_budget_1.6`` is what 1.6 × leaves for all of
them.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import resource
import subprocess
import sys
import time


def _nothing(x: int) -> int:
    return x


def dask_import() -> float:
    """Seconds to import dask.distributed, which the coordinator does before any shard runs."""
    start = time.perf_counter()
    importlib.import_module("dask.distributed")
    return time.perf_counter() - start


def dask_floor(k: int) -> dict:
    """Dask's own cost with nothing to do: K workers' boot, K trivial tasks, the close."""
    import dask
    from dask import distributed
    imported = time.perf_counter()
    with dask.config.set({"distributed.worker.profile.enabled": False}):
        cluster = distributed.LocalCluster(n_workers=k, processes=True, threads_per_worker=1,
                                           dashboard_address=":0", silence_logs=logging.CRITICAL)
    client = distributed.Client(cluster)
    booted = time.perf_counter()
    client.gather([client.submit(_nothing, i, pure=False) for i in range(k)])
    tasks = time.perf_counter()
    client.close()
    cluster.close()
    closed = time.perf_counter()
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"boot": round(booted - imported, 3),
            "tasks": round(tasks - booted, 3), "close": round(closed - tasks, 3),
            "workers_cpu": round(workers.ru_utime + workers.ru_stime, 2)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--limit-tokens", type=int, default=2**62 - 1)
    args = parser.parse_args()

    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import tfcert.cli.main, tfcert.verify.check, tfcert.shards, "
                    "tfcert.verify.float_analysis"], check=True)
    python_start = time.perf_counter() - started

    from tfcert.files import load
    from tfcert.process import rare_collection
    from tfcert.verify import check
    from tfcert.verify.numbers import LIMITS

    LIMITS.tokens = args.limit_tokens
    started = time.perf_counter()
    docs = {slot: load(f"{args.folder}/{slot}.json", slot) for slot in ("model", "dataset", "certificate")}
    read = time.perf_counter() - started
    replayed: dict[str, float] = {}
    replay_claims = check.replay_claims

    def timed(*a, **kw):
        replayed["start"] = time.perf_counter()
        out = replay_claims(*a, **kw)
        replayed["seconds"] = time.perf_counter() - replayed["start"]
        return out

    check.replay_claims = timed
    started = time.perf_counter()
    with rare_collection():  # as the command line runs it
        report = check.check_certificate(docs["model"], docs["dataset"], docs["certificate"])
    whole = time.perf_counter() - started
    check.replay_claims = replay_claims
    parse = replayed["start"] - started
    rest = whole - parse - replayed["seconds"]
    serial = python_start + read + parse + rest
    one = serial + replayed["seconds"]
    out = {"folder": args.folder, "ok": report.ok, "python_start": round(python_start, 2), "read": round(read, 2),
           "parse": round(parse, 2), "replayed_claims": round(replayed["seconds"], 2), "after": round(rest, 2),
           "one_process": round(one, 2)}
    try:
        imported = dask_import()
    except ImportError:  # the distributed extra is not installed: Amdahl's bound alone
        imported = None
    out["dask_import"] = None if imported is None else round(imported, 3)
    for k in (2, 4):
        out[f"best_speedup_{k}_without_dask"] = round(one / (serial + replayed["seconds"] / k), 3)
        if imported is not None:
            floor = dask_floor(k)
            out[f"dask_{k}"] = floor
            out[f"best_speedup_{k}"] = round(one / (serial + imported + floor["close"] + replayed["seconds"] / k), 3)
    out["overhead_budget_1.6"] = round(one / 1.6 - (serial + replayed["seconds"] / 2), 2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
