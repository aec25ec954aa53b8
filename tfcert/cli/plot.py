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


SERIES = {("separation", "min_gap"): "separation gap", ("hat", "margin"): "hat isolation margin",
          ("snap", "radius"): "snap radius (its plateau)", ("tau_star", "noise_bound"): "collapse noise bound at τ*",
          ("tau_star", "radius"): "noise the snaps allow"}
MARKERS = {"least argmax gap (attention)": "o", "separation gap": "^", "hat isolation margin": "s",
           "snap radius (its plateau)": "D", "collapse noise bound at τ*": "v", "noise the snaps allow": "x"}


def margins(cert_value: dict, name: str) -> dict[str, dict[int, fmpq]]:
    """Per block, the least of each distance a claim states (separation gap,
    hat isolation margins, snap radii; softmax: the collapse's noise bound
    and the noise the snaps allow): what the construction keeps between
    tokens. A null margin (a token alone has no neighbour) is not drawn."""
    from tfcert.verify.numbers import parse_number

    out: dict[str, dict[int, fmpq]] = defaultdict(dict)
    for p, phase in enumerate(cert_value["phases"]):
        for c, claim in enumerate(phase.get("claims", [])):
            block = claim.get("block") if isinstance(claim, dict) else None
            if not isinstance(block, int):
                continue
            for (kind, key), label in SERIES.items():
                if claim.get("kind") == kind and claim.get(key) is not None:
                    value = parse_number(claim[key], f"{name}: $.phases[{p}].claims[{c}].{key}")
                    if value > 0:
                        out[label][block] = min(value, out[label].get(block, value))
    return {label: out[label] for label in SERIES.values() if label in out}


def log10(x: fmpq) -> float:
    """log10 of a positive rational, even one too small for a float."""
    return math.log10(int(x.p)) - math.log10(int(x.q))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


RING_STEP, RING_MAX = 1.6, 6.0  # a ring's growth in diameter over the one inside it; the outermost's cap


def ring_sizes(k: int, base: float) -> list[float]:
    """Marker areas of the k nested rings of a point shared by k sequences,
    outermost first; the outermost is at most RING_MAX times the base diameter."""
    step = min(RING_STEP, (RING_MAX - 1) / max(k - 1, 1))
    return [base * (1 + step * (k - 1 - r)) ** 2 for r in range(k)]


def _nested(ax, groups: dict, colors, marker: str, base: float, filled: bool) -> None:
    """Each point once: a point shared by k sequences is k nested markers,
    one ring per sequence, so no sequence hides another."""
    for point, seqs in groups.items():
        for r, (j, size) in enumerate(zip(seqs, ring_sizes(len(seqs), base))):
            if filled:
                ax.scatter([point[0]], [point[1]], s=size, color=colors(j % 10), edgecolors="white",
                           linewidths=0.6, zorder=3 + r)
            else:
                ax.scatter([point[0]], [point[1]], s=size, marker=marker, facecolors="none",
                           edgecolors=colors(j % 10), linewidths=1.4, zorder=2 + r)


COUNT_GAP = 2.0  # points between a marker's edge and a count beside it
COUNT_SIZE = 7  # points: the font of the counts
DIRECTIONS = ((1, 0), (0.71, 0.71), (0, 1), (-0.71, 0.71), (-1, 0), (0.71, -0.71), (0, -1), (-0.71, -0.71))


def _reach(k: int, base: float) -> float:
    """Half the width (points) of the outermost of k nested markers of area ``base``, with its edge line."""
    return math.sqrt(ring_sizes(k, base)[0]) / 2 + 0.7


def _count_box(centre, reach: float, direction, size: tuple[float, float]):
    """The box (x0, y0, x1, y1, in points) of a count put beside a marker
    ``reach`` points wide about ``centre``, in ``direction``; and its ha, va."""
    dx, dy = direction
    w, h = size
    x = centre[0] + (reach + COUNT_GAP) * dx
    y = centre[1] + (reach + COUNT_GAP) * dy
    ha = "left" if dx > 0.3 else "right" if dx < -0.3 else "center"
    va = "bottom" if dy > 0.3 else "top" if dy < -0.3 else "center"
    x0 = {"left": x, "right": x - w, "center": x - w / 2}[ha]
    y0 = {"bottom": y, "top": y - h, "center": y - h / 2}[va]
    return (x0, y0, x0 + w, y0 + h), ha, va, (x - centre[0], y - centre[1])


def _overlap(a, b) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _counts(ax, tokens: dict, targets: dict) -> None:
    """The count of a token shared by sequences, beside everything drawn at
    that point (its outermost ring, a target square there): in the first of
    eight directions, right first, where it meets no marker and no other
    count and stays in the panel (else where it meets least). Placed after
    the panel's limits are final, in points."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    scale = 72 / ax.figure.dpi  # display pixels -> points
    box = ax.get_window_extent()
    panel = (box.x0 * scale, box.y0 * scale, box.x1 * scale, box.y1 * scale)
    where = {p: tuple(v * scale for v in ax.transData.transform(p)) for p in {*tokens, *targets}}
    reach = {p: max(_reach(len(tokens[p]), TOKEN) if p in tokens else 0.0,
                    _reach(len(targets[p]), TARGET) if p in targets else 0.0) for p in where}
    taken = [(c[0] - reach[p], c[1] - reach[p], c[0] + reach[p], c[1] + reach[p]) for p, c in where.items()]
    for point, seqs in tokens.items():
        if len(seqs) < 2:
            continue
        text = str(len(seqs))
        w, h, _ = TextToPath().get_text_width_height_descent(text, FontProperties(size=COUNT_SIZE), ismath=False)
        best = None
        for direction in DIRECTIONS:
            placed = _count_box(where[point], reach[point], direction, (w * 1.1, h * 1.1))
            rect = placed[0]
            outside = (rect[2] - rect[0]) * (rect[3] - rect[1]) - _overlap(rect, panel)
            cost = outside + sum(_overlap(rect, other) for other in taken)
            if best is None or cost < best[0]:
                best = (cost, placed)
            if cost == 0:
                break
        rect, ha, va, offset = best[1]
        taken.append(rect)
        ax.annotate(text, point, textcoords="offset points", xytext=offset, ha=ha, va=va, fontsize=COUNT_SIZE,
                    color="0.25", zorder=20, annotation_clip=False)


def _groups(seqs) -> dict:
    out: dict = defaultdict(list)
    for j, seq in enumerate(seqs):
        for x in seq:
            if j not in out[x]:
                out[x].append(j)
    return out


def padded(lo: float, hi: float, pixels: float, reserve: float) -> tuple[float, float]:
    """Axis limits around [lo, hi] leaving ``reserve`` pixels at each end of
    an axis ``pixels`` long, so a marker that size on the extreme point is
    drawn whole; a single value gets a span of its own."""
    span = hi - lo if hi > lo else (abs(lo) / 5 or 2.0)
    lo, hi = (lo, hi) if hi > lo else (lo - span / 2, hi + span / 2)
    pad = span * reserve / max(pixels - 2 * reserve, 1.0)
    return lo - pad, hi + pad


def fit_axes(ax, points: list[tuple[float, float]], largest_area: float) -> None:
    """Limits that show every point with its largest marker (area in pt²) inside the panel.
    An axis on which every point has one value (after the separation all y are
    equal) gets that value as its only tick, and the other axis's span around it,
    not a made-up range with fractional ticks."""
    from matplotlib.ticker import FixedLocator

    box = ax.get_window_extent()
    reserve = (math.sqrt(largest_area) / 2 + 4) * ax.figure.dpi / 72
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    spans = (max(xs) - min(xs), max(ys) - min(ys))
    for values, pixels, other, set_limits, axis in ((xs, box.width, spans[1], ax.set_xlim, ax.xaxis),
                                                     (ys, box.height, spans[0], ax.set_ylim, ax.yaxis)):
        lo, hi = min(values), max(values)
        if hi == lo:
            axis.set_major_locator(FixedLocator([lo]))
            if other > 0:
                lo, hi = lo - other / 2, hi + other / 2
        set_limits(*padded(lo, hi, pixels, reserve))


def png(fig) -> bytes:
    """A figure's PNG bytes; the figure is closed."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    _pyplot().close(fig)
    return buffer.getvalue()


TOKEN, TARGET = 26.0, 57.0  # marker areas (pt²): a token, a target square around it


def token_figure(shots: list[Shot], dataset: Dataset):
    """One panel per phase end; targets (squares) in the first and last panels."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    cols = min(len(shots), 4)
    rows = -(-len(shots) // cols)
    height = 3.3 * rows + 0.5
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, height), squeeze=False)
    colors = plt.get_cmap("tab10")
    targets = _groups([[tuple(shown(v) for v in y) for y in p.output] for p in dataset.pairs])
    panels = []
    for n, ax in enumerate(axes.flat):
        if n >= len(shots):
            ax.axis("off")
            continue
        shot = shots[n]
        tokens = _groups(shot.tokens)
        _nested(ax, tokens, colors, "o", TOKEN, filled=True)
        points, largest = list(tokens), max(ring_sizes(max(map(len, tokens.values())), TOKEN))
        if n in (0, len(shots) - 1):
            _nested(ax, targets, colors, "s", TARGET, filled=False)
            points += list(targets)
            largest = max(largest, ring_sizes(max(map(len, targets.values())), TARGET)[0])
        panels.append((ax, points, largest, tokens, targets if n in (0, len(shots) - 1) else {}))
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
    clamped = any(abs(v) == float(LIMIT) for _, points, *_ in panels for p in points for v in p)
    fig.suptitle("tokens of every sequence through the phases"
                 + (" (coordinates beyond ±1e300 drawn at ±1e300)" if clamped else ""), fontsize=11)
    fig.tight_layout(rect=(0, 0.45 / height, 1, 0.97))
    for ax, points, largest, tokens, targets in panels:  # after the layout: the reserve for markers is in pixels
        fit_axes(ax, points, largest)
        _counts(ax, tokens, targets)
    return fig


LABEL_SIZE = 7  # points: the phase labels of the profile's strip


def label_inches(text: str) -> float:
    """How wide ``text`` is drawn at LABEL_SIZE, in inches (the font's own
    metrics, and 2% for the renderer's hinting)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    width, _, _ = TextToPath().get_text_width_height_descent(text, FontProperties(size=LABEL_SIZE), ismath=False)
    return width / 72 * 1.02


def blocks_spanned(spans: list[PhaseSpan], n_blocks: int) -> list[PhaseSpan]:
    """The phases drawn in the profile's strip: those with blocks, but not a
    summary spanning the whole model (such as "final") unless it is alone."""
    moving = [s for s in spans if s.end > s.first]
    return [s for s in moving if (s.first, s.end) != (0, n_blocks)] or moving


LABEL_GAP = 0.04  # inches between a phase's label and its bar's ends (inside) or the bar (beside it)


def label_place(s: PhaseSpan, width: float, gap: float, n_blocks: int) -> tuple[float, str]:
    """Where a phase's label goes, in blocks (``width`` its width, ``gap``
    LABEL_GAP): (x, ha). Inside its bar, centred, when it fits with a gap at
    both ends; else beside the bar, right of it, or left where the right
    would leave the axis; centred only when neither side has room."""
    left, right = s.first - 0.5, s.end - 0.5
    if width + 2 * gap <= right - left:
        return (left + right) / 2, "center"
    if right + gap + width <= max(n_blocks, 1) - 0.5:
        return right + gap, "left"
    if left - gap - width >= -0.5:
        return left - gap, "right"
    return (left + right) / 2, "center"


def label_extent(x: float, ha: str, width: float) -> tuple[float, float]:
    start = {"center": x - width / 2, "left": x, "right": x - width}[ha]
    return start, start + width


def lanes(spans: list[PhaseSpan], width: dict[str, float], gap: float = 0.0, n_blocks: int | None = None) -> list[int]:
    """A row for each phase's bar and label in the strip: the first row in
    which neither its blocks nor its label (``width`` in blocks, placed by
    ``label_place``) meet those of a phase already there, so nothing is
    drawn over anything."""
    taken: list[list[tuple[float, float]]] = []
    out = []
    n = max((s.end for s in spans), default=1) if n_blocks is None else n_blocks
    for s in spans:
        start, end = label_extent(*label_place(s, width[s.name], gap, n), width[s.name])
        extent = (min(s.first - 0.5, start - gap), max(s.end - 0.5, end + gap))
        row = next((i for i, used in enumerate(taken) if all(extent[1] <= a or b <= extent[0] for a, b in used)),
                   len(taken))
        if row == len(taken):
            taken.append([])
        taken[row].append(extent)
        out.append(row)
    return out


def _runs(blocks: list[int]) -> list[list[int]]:
    """Consecutive blocks together: a line joins neighbouring layers only."""
    out: list[list[int]] = []
    for b in blocks:
        if out and b == out[-1][-1] + 1:
            out[-1].append(b)
        else:
            out.append([b])
    return out


MARKER_SIZE = 5.0  # points: the profile's markers
DODGE_MAX = 0.4  # blocks: the farthest a marker moves from its block's tick, inside the block


def dodged(ax, logs: dict[str, dict[int, float]], inches_per_block: float) -> dict[tuple[str, int], float]:
    """(series, block) -> horizontal shift in blocks for markers that would be
    drawn over one another: points of one block whose heights lie within a
    marker of each other (the τ* claim's noise bound and the noise the snaps
    allow are often equal) are spread side by side, in the series' order,
    about the block, at least a marker apart (but within DODGE_MAX)."""
    ax_height = ax.get_window_extent().height / ax.figure.dpi  # inches; the limits are set
    y0, y1 = ax.get_ylim()
    per_inch = (y1 - y0) / ax_height  # data units of y per inch
    near = MARKER_SIZE / 72 * 1.2 * per_inch
    by_block: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for label, ys in logs.items():
        for b, y in ys.items():
            by_block[b].append((y, label))
    order = {label: k for k, label in enumerate(logs)}
    out = {}
    for b, points in sorted(by_block.items()):
        points.sort()
        clusters: list[list[tuple[float, str]]] = []
        for y, label in points:  # by height: neighbours closer than a marker join one cluster
            if clusters and y - clusters[-1][-1][0] < near:
                clusters[-1].append((y, label))
            else:
                clusters.append([(y, label)])
        for cluster in clusters:
            if len(cluster) < 2:
                continue
            step = min(max(0.3, MARKER_SIZE / 72 * 1.4 / inches_per_block), 2 * DODGE_MAX / (len(cluster) - 1))
            for k, (_, label) in enumerate(sorted(cluster, key=lambda p: order[p[1]])):
                out[(label, b)] = (k - (len(cluster) - 1) / 2) * step
    return out


def profile_figure(spans: list[PhaseSpan], n_blocks: int, gaps: dict[int, fmpq],
                   margin: dict[str, dict[int, fmpq]], kind: str):
    """log10 of each layer's least argmax gap and of the distances the claims
    state, under a strip of the phases; softmax adds τ* and the collapse's noise."""
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    width = max(6.0, min(14.0, 0.12 * n_blocks + 5)) + 2.1
    drawn = blocks_spanned(spans, n_blocks)
    inches_per_block = (width - 3.0) / max(n_blocks, 1)  # the axes are width - 3 inches wide (subplots_adjust)
    label_blocks = {s.name: label_inches(s.name) / inches_per_block for s in drawn}
    gap = LABEL_GAP / inches_per_block
    rows = lanes(drawn, label_blocks, gap, n_blocks)
    n_rows = max(rows, default=0) + 1
    fig, (strip, ax) = plt.subplots(2, 1, sharex=True, figsize=(width, 3.4 + 0.22 * n_rows),
                                    gridspec_kw={"height_ratios": [0.22 * n_rows, 3.0], "hspace": 0.05})
    fig.subplots_adjust(left=0.9 / width, right=1 - 2.1 / width, bottom=0.55 / fig.get_figheight(),
                        top=1 - 0.35 / fig.get_figheight())  # first: dodged() measures the axes
    for s, row in zip(drawn, rows):
        strip.barh(row, s.end - s.first, left=s.first - 0.5, height=0.8, color="0.88", edgecolor="0.6", linewidth=0.6)
        x, ha = label_place(s, label_blocks[s.name], gap, n_blocks)
        strip.text(x, row, s.name, ha=ha, va="center", fontsize=LABEL_SIZE)
        for edge in {s.first - 0.5, s.end - 0.5}:
            ax.axvline(edge, color="0.75", linewidth=0.6, linestyle=":", zorder=0)
    strip.set_ylim(n_rows - 0.5, -0.5)
    strip.set_label("phases")
    ax.set_label("profile")
    strip.axis("off")
    series = {"least argmax gap (attention)": gaps, **margin}
    logs = {label: {b: log10(v) for b, v in sorted(by_block.items())} for label, by_block in series.items() if by_block}
    values = [y for ys in logs.values() for y in ys.values()]
    ax.set_xlim(-0.5, max(n_blocks, 1) - 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if values:
        lo, hi = min(values), max(values)
        pad = max((hi - lo) * 0.12, 0.5)
        ax.set_ylim(lo - pad, hi + pad)
    shift = dodged(ax, logs, inches_per_block)
    for i, (label, by_block) in enumerate(series.items()):
        if label not in logs:
            continue
        ys = logs[label]
        xs = {b: b + shift.get((label, b), 0.0) for b in ys}
        ax.plot(list(xs.values()), list(ys.values()), marker=MARKERS[label], linestyle="", markersize=MARKER_SIZE,
                color=f"C{i}", label=label, clip_on=False, zorder=3)
        for run in _runs(list(ys)):
            if len(run) > 1:
                ax.plot([xs[b] for b in run], [ys[b] for b in run], color=f"C{i}", linewidth=0.8, zorder=2)
    if values:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        ax.text(0.5, 0.5, "no gaps or margins to draw", transform=ax.transAxes, ha="center", color="0.4")
    ax.set_xlabel("block")
    ax.set_ylabel("log10 (exact value)")
    ax.grid(alpha=0.3)
    strip.set_title(f"per-layer profile ({kind}): what keeps tokens apart", fontsize=10)
    return fig


@dataclass(frozen=True)
class Pictures:
    """A bundle's pictures as PNG bytes (name -> bytes: "phases", "profile"),
    and why a picture was not drawn (name -> reason)."""
    png: dict[str, bytes]
    skipped: dict[str, str]

    def write(self, out: str | Path) -> dict[str, Path]:
        """Write OUT/NAME.png for every picture, all together (construct.bundle.write)."""
        from tfcert.construct.bundle import write

        write({f"{k}.png": v for k, v in self.png.items()}, out)
        return {k: Path(out) / f"{k}.png" for k in self.png}


def approx(x: fmpq) -> str:
    """A positive rational in a few digits, even one past float's range."""
    return f"{float(x):.4g}" if fmpq(1, 10**300) < x < 10**300 else f"10^{log10(x):.1f}"


def figures(model: Model, dataset: Dataset, cert_value: dict, spans: list[PhaseSpan],
            name: str = "certificate.json") -> tuple[dict, dict[str, str]]:
    """The matplotlib figures (name -> figure) and the pictures not drawn
    (name -> reason); ``name`` is the certificate's, for error messages."""
    margin = margins(cert_value, name)
    shots, gaps = trace(model, dataset, spans)
    if model.attention != "softmax":
        kind = model.attention
    else:
        tau = model.temperature
        kind = ("softmax, τ* = " if cert_value.get("tau_star") is not None else "softmax at τ = ") + \
            (f"{tau} ≈ " if len(str(tau)) <= 20 else "") + approx(tau)
    out, skipped = {}, {}
    if model.d == 2:
        out["phases"] = token_figure(shots, dataset)
    else:
        skipped["phases"] = f"tokens are drawn in the plane, and this model has d = {model.d}"
    out["profile"] = profile_figure(spans, len(model.blocks), gaps, margin, kind)
    return out, skipped


def render(model: Model, dataset: Dataset, cert_value: dict, spans: list[PhaseSpan],
           name: str = "certificate.json") -> Pictures:
    """Every picture, drawn in memory before any is written."""
    drawn, skipped = figures(model, dataset, cert_value, spans, name)
    return Pictures({k: png(fig) for k, fig in drawn.items()}, skipped)


def read_bundle(bundle: str | Path) -> tuple[Model, Dataset, dict, list[PhaseSpan], str]:
    """A bundle folder's model, dataset, certificate (value, phases, path): the arguments of ``figures``/``render``."""
    model_doc, dataset_doc = load(bundle_file(bundle, "model"), "model"), load(bundle_file(bundle, "dataset"), "dataset")
    cert_doc = load(bundle_file(bundle, "certificate"), "certificate")
    model, dataset = read_model(model_doc), read_dataset(dataset_doc)
    return model, dataset, cert_doc.value, phases(cert_doc.value, len(model.blocks), cert_doc.path), cert_doc.path


def render_bundle(bundle: str | Path) -> Pictures:
    """The pictures of a bundle folder (``tfcert plot``; write them with ``.write(dir)``)."""
    return render(*read_bundle(bundle))
