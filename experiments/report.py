"""Results: tables (text and Markdown), a JSON document and a PNG plot.

A ``Result`` is what an experiment concludes from its records (jobs.py): the claim tested, the
agreement criterion (fixed in the code before any run, printed with every table), what this run
can and cannot show in plain words, the tables, machine-readable rows with their verdicts, and
the records themselves.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from tfcert.errors import InputError


@dataclass(frozen=True)
class Spread:
    """NMSE over seeds: geometric mean, least and greatest."""

    mean: float
    lo: float
    hi: float
    values: tuple[float, ...]

    @staticmethod
    def of(values) -> Spread:
        values = tuple(float(v) for v in values)
        if not values:
            return Spread(math.nan, math.nan, math.nan, ())
        mean = math.exp(sum(math.log(max(v, 1e-300)) for v in values) / len(values))
        return Spread(mean, min(values), max(values), values)

    def text(self) -> str:
        if not self.values:
            return "-"
        if len(self.values) == 1:
            return f"{self.mean:.1e}"
        return f"{self.mean:.1e} ({self.lo:.0e}–{self.hi:.0e})"

    def to_json(self) -> dict:
        return {"geomean": self.mean, "min": self.lo, "max": self.hi, "seeds": list(self.values)}


def steps_text(records) -> str:
    """The training steps the records ran (a deadline may have cut them), e.g. "3701" or "723–846"."""
    values = sorted({r["steps"] for r in records if "steps" in r})
    if not values:
        return "?"
    return str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def text(self) -> str:
        widths = [max(len(x[i]) for x in [self.columns, *self.rows]) for i in range(len(self.columns))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [self.columns, *self.rows]]
        return "\n".join([self.title, *lines])

    def markdown(self) -> str:
        def line(cells) -> str:
            return "| " + " | ".join(cells) + " |"
        return "\n".join([f"**{self.title}**", "", line(self.columns),
                          line("---" for _ in self.columns), *map(line, self.rows)])


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, Spread], ...]  # (x, NMSE over seeds)


@dataclass(frozen=True)
class Result:
    experiment: str
    quick: bool
    device: str
    claim: str  # the prediction tested, in words (InfoFlow's unless ``claimant`` says otherwise)
    criterion: str  # what "agrees" means, fixed before running
    scope: str  # what this run can and cannot show, in plain words
    verdict: str
    tables: tuple[Table, ...]
    rows: tuple[dict, ...]  # the tables' content, machine-readable, with verdicts
    x_label: str
    series: tuple[Series, ...]
    records: tuple[dict, ...] = field(default=(), repr=False)
    log_x: bool = False
    claimant: str = "InfoFlow"  # whose claim is tested
    y_label: str = "held-out NMSE"
    baseline: float | None = 1.0  # a reference line (NMSE 1: predicting the mean)

    def to_json(self, files: dict[str, str], meta: dict | None = None) -> dict:
        return {"experiment": self.experiment, "quick": self.quick, "device": self.device,
                **{k: v for k, v in (meta or {}).items() if k != "device"}, "claim": self.claim, "criterion": self.criterion,
                "scope": self.scope, "verdict": self.verdict, "rows": list(self.rows),
                "records": list(self.records), "files": files}


def _header(result: Result) -> list[str]:
    mode = "quick mode" if result.quick else "full mode"
    return [f"{result.experiment} ({mode}; {result.device})", f"{result.claimant}: {result.claim}",
            f"agreement criterion (fixed before running): {result.criterion}",
            f"what this run can show: {result.scope}"]


def text(result: Result) -> str:
    parts = ["\n".join(_header(result))] + [t.text() for t in result.tables]
    return "\n\n".join(parts + [f"verdict: {result.verdict}"])


def markdown(result: Result) -> str:
    head = "\n".join(f"* {line}" for line in _header(result)[1:])
    return "\n\n".join([head, *(t.markdown() for t in result.tables), f"**Verdict:** {result.verdict}"])


def plot(result: Result, path: Path) -> None:
    """The y values (log scale; NMSE: geometric mean over seeds, bars from least to greatest) per series."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    styles = ["-", "--", ":", "-."]
    for i, s in enumerate(result.series):
        points = sorted(s.points, key=lambda p: p[0])
        xs = [x for x, _ in points]
        ys = [p.mean for _, p in points]
        err = [[max(0.0, p.mean - p.lo) for _, p in points], [max(0.0, p.hi - p.mean) for _, p in points]]
        ax.errorbar(xs, ys, yerr=err, marker="o", markersize=3, capsize=2, linewidth=1,
                    linestyle=styles[(i // 10) % len(styles)], label=s.name)
    if result.baseline is not None:
        ax.axhline(result.baseline, color="grey", linestyle="--", linewidth=0.8)
    ax.set_yscale("log")
    if result.log_x:
        ax.set_xscale("log")
    else:
        from matplotlib.ticker import MaxNLocator
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(result.x_label)
    ax.set_ylabel(result.y_label)
    ax.set_title(f"{result.experiment}{' (quick)' if result.quick else ''}")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def check_writable(out: Path) -> None:
    """Refuse an unwritable ``--out`` before anything is trained."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".tfcert-write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"--out: cannot write {out}: {exc.strerror or exc}") from None


def write(result: Result, out: Path, meta: dict | None = None) -> dict:
    """Write DIR/<name>.png and DIR/<name>.json; return the JSON document."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        png, doc_path = out / f"{result.experiment}.png", out / f"{result.experiment}.json"
        plot(result, png)
        doc = result.to_json({"png": str(png), "json": str(doc_path)}, meta)
        doc_path.write_text(json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        raise InputError(f"--out: cannot write {out}: {exc.strerror or exc}") from None
    return doc
