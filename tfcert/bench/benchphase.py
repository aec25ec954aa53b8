"""One phase of ``tfcert bench`` as a process of its own: ``python -m
tfcert.bench.benchphase PHASE FOLDER [ATTENTION]`` prints one JSON line, what the phase
reports and the process's peak memory.

Each phase imports only what it needs, so its whole-process seconds are what
a user's process spends: verify does not pay for numpy, which only the
float64 peer and the untimed columns use, nor for the rest of the benchmark.
"""
from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Callable

from tfcert.errors import InputError


def construct(folder: Path, attention: str = "hardmax") -> dict:
    """What ``tfcert construct`` does: construct, certify, verify the certificate."""
    from tfcert.construct.bundle import build

    start = time.perf_counter()
    bundle = build(folder / "dataset.json", attention)
    for name in ("model.json", "certificate.json"):
        (folder / name).write_bytes(bundle.files[name])
    dataset = bundle.dataset
    return {"work_s": time.perf_counter() - start, "blocks": len(bundle.construction.model.blocks),
            "tokens": sum(len(p.input) for p in dataset.pairs), "outputs": dataset.total_outputs}


def verify(folder: Path) -> dict:
    """What ``tfcert verify`` does."""
    from tfcert.verify.check import verify_files

    start = time.perf_counter()
    report = verify_files(folder / "model.json", folder / "dataset.json", folder / "certificate.json")
    return {"work_s": time.perf_counter() - start, "ok": report.ok, "claims": len(report.results),
            "failed": sorted({r.kind for r in report.results if not r.ok})}


def float64(folder: Path) -> dict:
    """The peer: the dense float64 forward pass, reading the files too."""
    from tfcert.bench.peers import dense_forward

    start = time.perf_counter()
    dense_forward((folder / "model.json").read_bytes(), (folder / "dataset.json").read_bytes())
    return {"work_s": time.perf_counter() - start}


def naive(folder: Path) -> dict:
    from tfcert.bench.peers import interpolates, naive_replay

    start = time.perf_counter()
    raw = (folder / "dataset.json").read_bytes()
    outputs, _ = naive_replay((folder / "model.json").read_bytes(), raw)
    return {"work_s": time.perf_counter() - start, "interpolates": interpolates(outputs, raw)}


def bits(folder: Path) -> dict:
    """Untimed: the naive replay again, noting the largest bits of every token after every layer."""
    from tfcert.bench.peers import naive_replay

    _, seen = naive_replay((folder / "model.json").read_bytes(), (folder / "dataset.json").read_bytes(),
                           track_bits=True)
    return {"token_numerator_bits": seen[0], "token_denominator_bits": seen[1]}


def stats(folder: Path) -> dict:
    """Untimed: the model's bits and the float columns (the observed float
    runs only up to OBSERVE_LIMIT token-layers)."""
    from tfcert.bench.peers import OBSERVE_LIMIT, float_columns, parameters_of
    from tfcert.verify.formats import load_document, read_dataset, read_model

    model = read_model(load_document(folder / "model.json"))
    dataset = read_dataset(load_document(folder / "dataset.json"))
    observe = sum(len(p.input) for p in dataset.pairs) * len(model.blocks) <= OBSERVE_LIMIT
    weights = list(parameters_of(model))
    return {"model_numerator_bits": max(int(w.p).bit_length() for w in weights),
            "model_denominator_bits": max(int(w.q).bit_length() for w in weights),
            **float_columns(model, dataset, json.loads((folder / "certificate.json").read_bytes()), observe)}


PHASES: dict[str, Callable[[Path], dict]] = {
    "construct": construct, "verify": verify, "float64": float64, "naive": naive, "bits": bits, "stats": stats}


def peak_rss_mib() -> float:
    """This process's peak resident set (getrusage ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def main(argv: list[str]) -> int:
    phase, folder, *rest = argv  # PHASE FOLDER [ATTENTION] (construct's; default hardmax)
    attention = rest[0] if rest else "hardmax"
    from tfcert.process import rare_collection
    from tfcert.verify.numbers import LIMITS

    LIMITS.tokens = 2**62 - 1  # as in run_bench: the shape is the size asked for
    try:
        with rare_collection():  # as the command line does: its time is the one measured
            result = construct(Path(folder), attention) if phase == "construct" else PHASES[phase](Path(folder))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({**result, "maxrss_mib": peak_rss_mib()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
