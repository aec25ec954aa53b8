"""Where construct's time goes, in one process (docs/scaling.md).

Run: ``python tests/construct_parts.py FOLDER`` (FOLDER/dataset.json; any limit lifted). Builds
the bundle as ``tfcert construct`` does (construct/bundle.build) and prints one JSON line: the
seconds of the whole and of its parts, each the total over its calls — the phases
(``construct``), writing the model file, the float analyses' probes, the certificate's claims,
its canonical bytes (``dumps``), reading the files back (``parse_document``) and the check with
the float analyses riding along (``check_certificate``) — and the float bounds it states.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import tfcert.construct.bundle as bundle
from tfcert.process import rare_collection
from tfcert.verify.numbers import LIMITS

PARTS = ("construct", "model_bytes", "float_analyses", "certificate", "dumps", "parse_document", "check_certificate")


def main() -> int:
    LIMITS.tokens = 2 ** 62 - 1
    seconds = dict.fromkeys(PARTS, 0.0)

    def timed(name, f):
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - start
        return run

    for name in PARTS:
        setattr(bundle, name, timed(name, getattr(bundle, name)))
    start = time.perf_counter()
    with rare_collection():  # the collector paced as the command line paces it
        built = bundle.build(Path(sys.argv[1]) / "dataset.json")
    total = time.perf_counter() - start
    print(json.dumps({"total_s": round(total, 2), **{f"{k}_s": round(v, 2) for k, v in seconds.items()},
                      "floats": {name: None if bound is None else float(bound) for name, bound, _ in built.floats}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
