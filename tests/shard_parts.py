"""What each shard of a sharded verification costs, in one process (docs/scaling.md).

Run: ``python tests/shard_parts.py FOLDER K [K ...]``. For each K, checks the bundle in FOLDER
with ``ShardedReplay(in_process, K)`` — the split, the shards' work (``verify_shard``: the replay
of its sequences with every replayed claim and the binary64 analysis) and the merge that
``--shards K`` runs on Dask, here one shard after another — and prints one JSON line: the
seconds to read the three files, each shard's seconds and sequences, and the coordinator's own
(parsing, the claims of the model alone, the merge). On K machines the wall time would be about
the reading, the coordinator's part and the slowest shard, plus the cluster's own costs (its
start, sending each worker the parse).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tfcert import shards
from tfcert.verify.check import check_certificate
from tfcert.verify.formats import load_document
from tfcert.verify.numbers import LIMITS


def main() -> int:
    folder, counts = Path(sys.argv[1]), [int(k) for k in sys.argv[2:]]
    LIMITS.tokens = 2**62 - 1
    timed, seen = shards.verify_shard, []

    def verify_shard(job, positions, *rest):
        start = time.perf_counter()
        out = timed(job, positions, *rest)
        seen.append((time.perf_counter() - start, len(positions)))
        return out
    shards.verify_shard = verify_shard
    for k in counts:
        seen.clear()
        start = time.perf_counter()
        docs = [load_document(folder / name) for name in ("model.json", "dataset.json", "certificate.json")]
        read = time.perf_counter()
        report = check_certificate(*docs, replay=shards.ShardedReplay(shards.in_process, k))
        end = time.perf_counter()
        print(json.dumps({"shards": k, "ok": report.ok, "read_s": round(read - start, 2),
                          "shard_s": [round(s, 2) for s, _ in seen], "sequences": [n for _, n in seen],
                          "coordinator_s": round(end - read - sum(s for s, _ in seen), 2)}), flush=True)
    return 0


if __name__ == "__main__":
    from tfcert.process import rare_collection

    with rare_collection():  # the garbage collector's pace of a tfcert process
        sys.exit(main())
