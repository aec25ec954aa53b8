"""``tfcert demo``: build, certify and verify the bundled 2-D example, print
the phase summary and draw the tokens through the phases (``tfcert plot``'s
pictures)."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from tfcert.audit.audit import tightness
from tfcert.construct.bundle import build, write_bundle
from tfcert.cli.plot import phases, render
from tfcert.progress import Bar
from tfcert.report import human, phase_table, size_line
from tfcert.verify.check import verify_files
from tfcert.verify.claims.size import measure

EXAMPLE = "demo.json"


def example_path() -> Path:
    return Path(str(resources.files("tfcert") / "examples" / EXAMPLE))


def run_demo(output: str, attention: str) -> int:
    with Bar("demo") as bar:
        bundle = build(example_path(), attention, progress=bar)
    write_bundle(bundle.files, output, force=True)  # the demo's own folder: re-running replaces it
    out = Path(output)
    c = bundle.construction
    print(f"dataset: bundled example, N = {len(bundle.dataset.pairs)}, d = {bundle.dataset.d}, "
          f"Σm = {bundle.dataset.total_outputs}")
    print(phase_table(c))
    print(size_line(measure(c.model, bundle.dataset, c.theorem)))
    if attention == "softmax":
        with Bar("demo") as bar:
            tau, tau_emp, ratio = tightness(c.model, bundle.dataset, bar)
        print(f"tau* = {tau} (≈ {float(tau):.6g}): exact interpolation at every 0 < tau <= tau*")
        print(f"tau_emp = {tau_emp} (≈ {float(tau_emp):.6g}): largest temperature the enclosure certifies")
        print(f"tightness tau*/tau_emp = {float(ratio):.4f}")
    report = verify_files(out / "model.json", out / "dataset.json", out / "certificate.json")
    print(human(report))
    cert = json.loads(bundle.files["certificate.json"])
    pictures = render(c.model, bundle.dataset, cert, phases(cert, len(c.model.blocks), "certificate.json")).write(out)
    print(f"wrote {out}/dataset.json, model.json, certificate.json, {pictures['phases']} and {pictures['profile']}")
    return 0 if report.ok else 1
