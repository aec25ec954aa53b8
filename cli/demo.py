"""``tfcert demo``: build, certify and verify the bundled 2-D example, print
the phase summary and draw the tokens through the phases."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from tfcert.audit.audit import tightness
from tfcert.construct.bundle import build, write
from tfcert.report import human, phase_table, size_line
from tfcert.verify.check import verify_files
from tfcert.verify.claims.size import measure
from tfcert.verify.enclose import coordinate_range, is_point
from tfcert.verify.evaluate import Replay

EXAMPLE = "demo.json"


def example_path() -> Path:
    return Path(str(resources.files("tfcert") / "examples" / EXAMPLE))


def snapshots(construction, dataset) -> list[tuple[str, list]]:
    """Tokens at the input and after each phase that moves them."""
    ends = {}
    for p in construction.phases:
        if p.name == "collapse":
            ends[(p.span[1] - 1, "sa")] = "after collapse"
        elif p.name == "leaders" and p.span[1] > p.span[0]:
            ends[(p.span[1] - 1, "ff")] = "after leaders"
        elif p.span[1] > p.span[0]:
            ends[(p.span[1] - 1, "sa")] = f"after {p.name}"
    shots = [("input", [list(p.input) for p in dataset.pairs])]
    for step in Replay(construction.model, [p.input for p in dataset.pairs]).steps():
        label = ends.get((step.block, step.layer))
        if label:
            shots.append((label, [[centre(x) for x in s] for s in step.after]))
    return shots


def centre(x) -> tuple:
    """A point to draw for a token: itself, or the centre of its softmax enclosure."""
    if is_point(x):
        return x
    return tuple((lo + hi) / 2 for lo, hi in (coordinate_range(x, i) for i in range(2)))


def draw(shots, dataset, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(shots), figsize=(3.2 * len(shots), 3.4))
    colors = plt.get_cmap("tab10")
    for ax, (label, seqs) in zip(axes, shots):
        for j, seq in enumerate(seqs):
            ax.scatter([float(x[0]) for x in seq], [float(x[1]) for x in seq], s=28, alpha=0.75,
                       color=colors(j % 10), label=f"seq {dataset.pairs[j].index}")
        if label == shots[-1][0]:
            for j, p in enumerate(dataset.pairs):
                ax.scatter([float(y[0]) for y in p.output], [float(y[1]) for y in p.output], marker="x",
                           s=90, color=colors(j % 10))
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("tfcert: tokens through the phases (× = targets)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_demo(output: str, attention: str) -> int:
    bundle = build(example_path(), attention)
    write(bundle.files, output)
    out = Path(output)
    c = bundle.construction
    print(f"dataset: bundled example, N = {len(bundle.dataset.pairs)}, d = {bundle.dataset.d}, "
          f"Σm = {bundle.dataset.total_outputs}")
    print(phase_table(c))
    print(size_line(measure(c.model, bundle.dataset, c.theorem)))
    if attention == "softmax":
        tau, tau_emp, ratio = tightness(c.model, bundle.dataset)
        print(f"tau* = {tau} (≈ {float(tau):.6g}): exact interpolation at every 0 < tau <= tau*")
        print(f"tau_emp = {tau_emp} (≈ {float(tau_emp):.6g}): largest temperature the enclosure certifies")
        print(f"tightness tau*/tau_emp = {float(ratio):.4f}")
    report = verify_files(out / "model.json", out / "dataset.json", out / "certificate.json")
    print(human(report))
    picture = out / "phases.png"
    draw(snapshots(c, bundle.dataset), bundle.dataset, picture)
    print(f"wrote {out}/dataset.json, model.json, certificate.json and {picture}")
    return 0 if report.ok else 1
