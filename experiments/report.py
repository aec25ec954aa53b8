"""Results: one row per trained model, a text table, a JSON document and a PNG plot."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from tfcert.errors import InputError


@dataclass(frozen=True)
class Row:
    label: str
    config: dict
    T: int
    nmse: float
    prediction: dict
    agrees: bool | None  # None where the row alone says nothing (the reference of a comparison)
    seconds: float


@dataclass(frozen=True)
class Result:
    experiment: str
    quick: bool
    seed: int
    device: str
    claim: str  # InfoFlow's prediction in words
    agreement: str  # what "agrees" means for this experiment
    rows: tuple[Row, ...]

    def to_json(self, files: dict[str, str]) -> dict:
        return {"experiment": self.experiment, "quick": self.quick, "seed": self.seed,
                "device": self.device, "claim": self.claim, "agreement": self.agreement,
                "rows": [asdict(r) for r in self.rows], "files": files}


def _yes(agrees: bool | None) -> str:
    return "-" if agrees is None else "yes" if agrees else "no"


def table(result: Result) -> str:
    mode = "quick mode: short training, need not reproduce the phenomenon" if result.quick else "full mode"
    header = ["configuration", "T", "NMSE", "InfoFlow prediction", "agrees"]
    rows = [[r.label, str(r.T), f"{r.nmse:.2e}", r.prediction["text"], _yes(r.agrees)] for r in result.rows]
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [header, *rows]]
    return "\n".join([f"{result.experiment} ({mode}; seed {result.seed}, {result.device})",
                      f"InfoFlow: {result.claim}", f"agrees: {result.agreement}", "", *lines])


def plot(result: Result, x_key: str, series, path: Path) -> None:
    """NMSE (log scale) against ``x_key`` ("T" or a config key), one line per ``series(row)``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    lines: dict[str, list[tuple[int, float]]] = {}
    for r in result.rows:
        x = r.T if x_key == "T" else r.config[x_key]
        lines.setdefault(series(r), []).append((x, r.nmse))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, points in lines.items():
        xs, ys = zip(*sorted(points))
        ax.plot(xs, ys, marker="o", label=name)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(x_key)
    ax.set_ylabel("held-out NMSE")
    ax.set_title(f"{result.experiment}{' (quick)' if result.quick else ''}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(result: Result, out: Path, x_key: str, series) -> dict:
    """Write DIR/<name>.png and DIR/<name>.json; return the JSON document."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        png, doc_path = out / f"{result.experiment}.png", out / f"{result.experiment}.json"
        plot(result, x_key, series, png)
        doc = result.to_json({"png": str(png), "json": str(doc_path)})
        doc_path.write_text(json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        raise InputError(f"--out: cannot write {out}: {exc.strerror or exc}") from None
    return doc
