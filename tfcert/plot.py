"""Pictures of a bundle, drawn with matplotlib's Agg backend (no display
needed): for d = 2 the tokens of every sequence through the phases, and for
any d the per-layer profile of argmax gaps and isolation margins.

Everything is read from the bundle's files: the phases and their block
ranges come from the certificate, so any construction's bundles (and audit
certificates) can be drawn. Pictures are not proofs: ``tfcert verify``
checks the bundle; ``plot`` only replays and draws.
"""
from __future__ import annotations

import io
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from flint import fmpq

from tfcert.errors import InputError
from tfcert.files import bundle_file, load
from tfcert.verify.enclose import coordinate_range, is_point
from tfcert.verify.evaluate import Replay
from tfcert.verify.formats import Dataset, Model, array, integer, obj, read_dataset, read_model

MARGIN_FIELDS = {"margin": "isolation margin", "min_gap": "separation gap"}


@dataclass(frozen=True)
class PhaseSpan:
    name: str
    first: int
    end: int


@dataclass(frozen=True)
class Shot:
    """The tokens of every sequence after a block (``block`` = -1: the input)."""
    label: str
    block: int
    tokens: tuple[tuple[tuple[float, ...], ...], ...]


def phases(cert_value: object, n_blocks: int, name: str) -> list[PhaseSpan]:
    """The certificate's phases (name and block range), checked only as far
    as drawing needs."""
    top = obj(cert_value, f"{name}: $", ("phases",))
    out = []
    for p, raw in enumerate(array(top["phases"], f"{name}: $.phases")):
        where = f"{name}: $.phases[{p}]"
        phase = obj(raw, where, ("name", "blocks"))
        span = array(phase["blocks"], f"{where}.blocks")
        if len(span) != 2:
            raise InputError(f"{where}.blocks: expected [first, end]")
        first = integer(span[0], f"{where}.blocks[0]", 0, n_blocks)
        out.append(PhaseSpan(str(phase["name"]), first, integer(span[1], f"{where}.blocks[1]", first, n_blocks)))
    return out


def snapshot_ends(spans: list[PhaseSpan], n_blocks: int) -> dict[int, str]:
    """End block -> label: one picture after each phase that has blocks;
    phases that end together share it; a phase spanning the whole model
    (a summary such as "final") is drawn only when it is the only one."""
    moving = [s for s in spans if s.end > s.first]
    if len(moving) > 1:
        moving = [s for s in moving if (s.first, s.end) != (0, n_blocks)] or moving
    names: dict[int, list[str]] = defaultdict(list)
    for s in moving:
        names[s.end].append(s.name)
    return {end: "after " + " + ".join(names[end]) for end in sorted(names)}


LIMIT = 10**300  # the largest |coordinate| drawn: matplotlib's axis arithmetic overflows near float's range


def shown(v: fmpq) -> float:
    """A coordinate as drawn: exact values beyond ±LIMIT (1e400 has no float)
    are drawn at ±LIMIT, the edge of what the axes can show."""
    return float(max(-LIMIT, min(LIMIT, v)))


def centre(x, d: int) -> tuple[float, ...]:
    """A point to draw for a token: itself, or the centre of its softmax enclosure."""
    if is_point(x):
        return tuple(shown(v) for v in x)
    return tuple(shown((lo + hi) / 2) for lo, hi in (coordinate_range(x, i) for i in range(d)))


def trace(model: Model, dataset: Dataset, spans: list[PhaseSpan]) -> tuple[list[Shot], dict[int, fmpq]]:
    """One replay: the tokens after each phase, and the least argmax gap of
    every scored attention layer (block -> gap)."""
    ends = snapshot_ends(spans, len(model.blocks))
    shots = [Shot("input", -1, tuple(tuple(centre(x, model.d) for x in p.input) for p in dataset.pairs))]
    gaps: dict[int, fmpq] = {}
    for step in Replay(model, [p.input for p in dataset.pairs]).steps():
        if step.layer != "sa":
            continue
        if step.attention is not None:
            found = [a.gap for row in step.attention for a in row if a.gap is not None and a.gap > 0]
            if found:
                gaps[step.block] = min(found)
        if step.block + 1 in ends and model.d == 2:
            shots.append(Shot(ends[step.block + 1], step.block,
                              tuple(tuple(centre(x, 2) for x in seq) for seq in step.after)))
    return shots, gaps


def margins(cert_value: dict, name: str) -> dict[str, dict[int, fmpq]]:
    """Per block, the least of each margin a claim states (hat isolation
    margins, separation gaps): what the construction keeps between tokens.
    A null margin (one token alone has no neighbour to keep away) is not drawn."""
    from tfcert.verify.numbers import parse_number

    out: dict[str, dict[int, fmpq]] = defaultdict(dict)
    for p, phase in enumerate(cert_value["phases"]):
        for c, claim in enumerate(phase.get("claims", [])):
            block = claim.get("block") if isinstance(claim, dict) else None
            if not isinstance(block, int):
                continue
            for key, label in MARGIN_FIELDS.items():
                if claim.get(key) is not None:
                    value = parse_number(claim[key], f"{name}: $.phases[{p}].claims[{c}].{key}")
                    if value > 0:
                        out[label][block] = min(value, out[label].get(block, value))
    return dict(out)


def log10(x: fmpq) -> float:
    """log10 of a positive rational, even one too small for a float."""
    return math.log10(int(x.p)) - math.log10(int(x.q))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _nested(ax, groups: dict, colors, marker: str, base: float, filled: bool) -> None:
    """Each point once: a point shared by k sequences is k nested markers,
    one ring per sequence, so no sequence hides another."""
    for point, seqs in groups.items():
        k = len(seqs)
        for r, j in enumerate(seqs):
            size = base * (1 + 1.6 * (k - 1 - r)) ** 2 if k > 1 else base
            if filled:
                ax.scatter([point[0]], [point[1]], s=size, color=colors(j % 10), edgecolors="white",
                           linewidths=0.6, zorder=3 + r)
            else:
                ax.scatter([point[0]], [point[1]], s=size * 2.2, marker=marker, facecolors="none",
                           edgecolors=colors(j % 10), linewidths=1.4, zorder=2 + r)
        if k > 1 and filled:
            ax.annotate(str(k), point, textcoords="offset points", xytext=(5, 5), fontsize=7, color="0.25")


def _groups(seqs) -> dict:
    out: dict = defaultdict(list)
    for j, seq in enumerate(seqs):
        for x in seq:
            if j not in out[x]:
                out[x].append(j)
    return out


def png(fig) -> bytes:
    """A figure's PNG bytes; the figure is closed."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    _pyplot().close(fig)
    return buffer.getvalue()


def token_picture(shots: list[Shot], dataset: Dataset) -> bytes:
    """One panel per phase end; targets (squares) in the first and last panels."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    cols = min(len(shots), 4)
    rows = -(-len(shots) // cols)
    height = 3.3 * rows + 0.8
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, height), squeeze=False)
    colors = plt.get_cmap("tab10")
    targets = _groups([[tuple(shown(v) for v in y) for y in p.output] for p in dataset.pairs])
    for n, ax in enumerate(axes.flat):
        if n >= len(shots):
            ax.axis("off")
            continue
        shot = shots[n]
        _nested(ax, _groups(shot.tokens), colors, "o", 26, filled=True)
        if n in (0, len(shots) - 1):
            _nested(ax, targets, colors, "s", 26, filled=False)
        where = "" if shot.block < 0 else f" (through block {shot.block})"
        ax.set_title(shot.label + where, fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    handles = [Line2D([], [], marker="o", linestyle="", color=colors(j % 10), label=f"sequence {p.index}")
               for j, p in enumerate(dataset.pairs[:10])]
    handles += [Line2D([], [], marker="s", linestyle="", markerfacecolor="none", markeredgecolor="0.3",
                       label="target (first and last panel)"),
                Line2D([], [], marker="o", linestyle="", markersize=10, markerfacecolor="0.75",
                       markeredgecolor="white", label="nested rings + count: a token shared by sequences")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=7, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle("tokens of every sequence through the phases", fontsize=11)
    fig.tight_layout(rect=(0, 0.75 / height, 1, 0.97))
    return png(fig)


def profile_picture(spans: list[PhaseSpan], n_blocks: int, gaps: dict[int, fmpq],
                    margin: dict[str, dict[int, fmpq]]) -> bytes:
    """log10 of each layer's least argmax gap and the claims' margins, phases shaded."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, min(14.0, 0.12 * n_blocks + 5)), 3.6))
    series = {"least argmax gap (attention)": gaps, **margin}
    for (label, values), marker in zip(series.items(), "o^sD"):
        blocks = sorted(values)
        ax.plot(blocks, [log10(values[b]) for b in blocks], marker=marker, linestyle="-" if len(blocks) > 1 else "",
                markersize=4, linewidth=0.8, label=label)
    shaded = [s for s in spans if s.end > s.first and (s.first, s.end) != (0, n_blocks)]
    for i, s in enumerate(shaded):
        ax.axvspan(s.first - 0.5, s.end - 0.5, color="0.9" if i % 2 else "0.96", zorder=0)
        ax.text((s.first + s.end - 1) / 2, 1.0, s.name, transform=ax.get_xaxis_transform(), ha="center",
                va="bottom", fontsize=7)
    ax.set_xlim(-0.5, max(n_blocks, 1) - 0.5)
    ax.set_xlabel("block")
    ax.set_ylabel("log10 (exact value)")
    ax.grid(alpha=0.3)
    if any(series.values()):
        ax.legend(fontsize=7, loc="best")
    ax.set_title("per-layer profile: what keeps tokens apart", fontsize=10, pad=14)
    fig.tight_layout()
    return png(fig)


def plot_bundle(bundle: str | Path, output: str | Path) -> dict[str, Path]:
    """Draw a bundle folder; returns the pictures written (name -> path)."""
    model_doc, dataset_doc = load(bundle_file(bundle, "model"), "model"), load(bundle_file(bundle, "dataset"), "dataset")
    cert_doc = load(bundle_file(bundle, "certificate"), "certificate")
    model, dataset = read_model(model_doc), read_dataset(dataset_doc)
    spans = phases(cert_doc.value, len(model.blocks), cert_doc.path)
    return draw(model, dataset, cert_doc.value, spans, Path(output), cert_doc.path)


def render(model: Model, dataset: Dataset, cert_value: dict, spans: list[PhaseSpan],
           name: str = "certificate.json") -> dict[str, bytes]:
    """Every picture as PNG bytes (picture name -> bytes); ``name`` is the
    certificate's, for error messages."""
    shots, gaps = trace(model, dataset, spans)
    pictures = {}
    if model.d == 2:
        pictures["phases"] = token_picture(shots, dataset)
    pictures["profile"] = profile_picture(spans, len(model.blocks), gaps, margins(cert_value, name))
    return pictures


def draw(model: Model, dataset: Dataset, cert_value: dict, spans: list[PhaseSpan], out: Path,
         name: str = "certificate.json") -> dict[str, Path]:
    """Render every picture, then write them together (nothing is written on an error)."""
    from tfcert.construct.bundle import write

    pictures = render(model, dataset, cert_value, spans, name)
    write({f"{k}.png": v for k, v in pictures.items()}, out, force=True)
    return {k: out / f"{k}.png" for k in pictures}
