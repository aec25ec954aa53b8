"""tfcert plot: every bundle that verifies is drawn (one token, coordinates
past float's range, any d, both attentions), and a plot that exits 2 writes
nothing."""
from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import REPO
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tfcert.construct.bundle import build
from tfcert.cli.main import main
from tfcert.verify.formats import parse_document

CERTS = REPO / "certificates"
PNG = b"\x89PNG\r\n\x1a\n"
ONE_TOKEN = {"format": "tfcert.dataset/1", "d": 2, "pairs": [{"input": [["1", "0"]], "output": [["0", "1"]]}]}


def bundle_folder(ds: dict, attention: str, folder: Path) -> Path:
    bundle = build(parse_document("dataset.json", json.dumps(ds).encode()), attention)
    folder.mkdir(parents=True)
    for name, data in bundle.files.items():
        (folder / name).write_bytes(data)
    return folder


def plot_json(argv: list, capsys) -> tuple[int, dict | None, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else None), err


@pytest.fixture(autouse=True)
def _close_figures():
    """Figures drawn but never saved are closed after each test."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


COORDINATES = st.one_of(st.integers(-3, 3).map(str), st.sampled_from(["1e400", "-1e400", "1e-400", "3e299", "1/3"]))


@st.composite
def small_datasets(draw) -> dict:
    """A few short sequences whose coordinates may be huge or tiny; one-token datasets included."""
    d = draw(st.sampled_from([2, 3]))
    token = st.tuples(*[COORDINATES] * d)
    pairs, seen = [], set()
    for _ in range(draw(st.integers(1, 3))):
        xs = list(dict.fromkeys(draw(st.lists(token, min_size=1, max_size=3))))
        if frozenset(xs) in seen:
            continue
        seen.add(frozenset(xs))
        ys = list(dict.fromkeys(draw(st.lists(token, min_size=1, max_size=len(xs)))))
        pairs.append({"input": [list(x) for x in xs], "output": [list(y) for y in ys]})
    return {"format": "tfcert.dataset/1", "d": d, "pairs": pairs}


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(small_datasets(), st.sampled_from(["hardmax", "softmax"]))
@example(ONE_TOKEN, "hardmax")
@example({**ONE_TOKEN, "pairs": [{"input": [["1e400", "0"]], "output": [["0", "1"]]}]}, "hardmax")
@example({**ONE_TOKEN, "pairs": [{"input": [["1", "0"], ["0", "1e-400"]], "output": [["1e400", "-1e400"]]}]},
         "softmax")
def test_plot_draws_every_bundle_that_verifies(ds, attention):
    with tempfile.TemporaryDirectory() as tmp:
        folder = bundle_folder(ds, attention, Path(tmp) / "b")
        rc = main(["plot", str(folder), "-o", str(Path(tmp) / "p"), "--json", "-q"])
        assert rc == 0
        promised = {"phases", "profile"} if ds["d"] == 2 else {"profile"}
        assert sorted(p.name for p in (Path(tmp) / "p").iterdir()) == sorted(f"{k}.png" for k in promised)
        assert all((Path(tmp) / "p" / f"{k}.png").read_bytes()[:8] == PNG for k in promised)


def test_plot_that_fails_writes_nothing(tmp_path, capsys):
    """A margin no reader accepts is found before any picture is written (phases.png was written first)."""
    folder = tmp_path / "b"
    shutil.copytree(CERTS / "demo-hardmax", folder)
    cert = json.loads((folder / "certificate.json").read_text())
    hat = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "hat")
    hat["margin"] = "not a number"
    (folder / "certificate.json").write_text(json.dumps(cert))
    rc, _, err = plot_json(["plot", folder, "-o", tmp_path / "p"], capsys)
    assert rc == 2 and err.startswith("error: ") and "certificate.json: $.phases[" in err
    assert not (tmp_path / "p").exists()
    rc, _, _ = plot_json(["plot", folder], capsys)
    assert rc == 2 and sorted(p.name for p in folder.iterdir()) == ["certificate.json", "dataset.json", "model.json"]


# ---------------------------------------------------------------- what the pictures show

def built(tmp_path_factory, name: str, ds: dict, attention: str = "hardmax") -> Path:
    return bundle_folder(ds, attention, tmp_path_factory.mktemp("bundles") / name)


@pytest.fixture(scope="module")
def one_token(tmp_path_factory) -> Path:
    return built(tmp_path_factory, "one", ONE_TOKEN)


def profile_axes(folder: Path):
    from tfcert.cli.plot import figures, read_bundle

    fig = figures(*read_bundle(folder))[0]["profile"]
    return fig, {ax.get_label(): ax for ax in fig.axes}


@pytest.mark.parametrize("folder", [CERTS / "demo-hardmax", CERTS / "demo-softmax", CERTS / "random-d20-wide", None])
def test_profile_shows_every_phase_with_whole_ticks_and_labels_apart(folder, one_token):
    """Both halves of the model carry data (the interpolation's snaps too; a lone token has no
    gap or margin before them), ticks are whole blocks, every point lies inside the limits, and
    no two phase labels overlap."""
    from tfcert.cli.plot import MARKERS

    fig, axes = profile_axes(folder or one_token)
    ax, strip = axes["profile"], axes["phases"]
    cert = json.loads(((folder or one_token) / "certificate.json").read_text())
    start = next(p["blocks"][0] for p in cert["phases"] if p["name"] == "interpolation")
    points = [(x, y) for line in ax.get_lines() if line.get_label() in MARKERS for x, y in line.get_xydata()]
    assert folder is None or any(x < start for x, _ in points), "nothing drawn before the interpolation"
    assert any(x >= start for x, _ in points), "the interpolation half is empty"
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    assert all(x0 < x < x1 and y0 < y < y1 for x, y in points)
    ticks = [t for t in ax.get_xticks() if x0 <= t <= x1]
    assert ticks and all(float(t).is_integer() for t in ticks)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in strip.texts]
    assert len(boxes) >= 2
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


@pytest.mark.slow
def test_softmax_profile_shows_tau_star_and_the_noise():
    from tfcert.cli.plot import render_bundle

    hard, soft = render_bundle(CERTS / "demo-hardmax"), render_bundle(CERTS / "demo-softmax")
    assert hard.png["profile"] != soft.png["profile"]
    fig, axes = profile_axes(CERTS / "demo-softmax")
    tau = json.loads((CERTS / "demo-softmax" / "certificate.json").read_text())["tau_star"]
    assert tau in axes["phases"].get_title()
    labels = {line.get_label() for line in axes["profile"].get_lines()}
    assert {"collapse noise bound at τ*", "noise the snaps allow", "snap radius (its plateau)"} <= labels


@pytest.mark.parametrize("folder", [CERTS / "demo-hardmax", CERTS / "demo-softmax", None])
def test_phases_panels_hold_every_marker_whole(folder, one_token):
    """Every token and target marker lies inside its panel (the shared target at (3, -1.25) was cut)."""
    import math

    from tfcert.cli.plot import figures, read_bundle

    fig = figures(*read_bundle(folder or one_token))[0]["phases"]
    fig.canvas.draw()
    seen = 0
    for ax in fig.axes:
        box = ax.get_window_extent()
        for collection in ax.collections:
            radius = math.sqrt(max(collection.get_sizes())) / 2 * fig.dpi / 72
            for x, y in ax.transData.transform(collection.get_offsets()):
                seen += 1
                assert box.x0 <= x - radius and x + radius <= box.x1 and box.y0 <= y - radius and y + radius <= box.y1
    assert seen


def marker_boxes(fig, ax) -> list:
    """The display boxes of an axes' scatter markers (a disc or square of side sqrt(area))."""
    from matplotlib.transforms import Bbox

    out = []
    for collection in ax.collections:
        for size, (x, y) in zip(collection.get_sizes(), ax.transData.transform(collection.get_offsets())):
            r = math.sqrt(size) / 2 * fig.dpi / 72
            out.append(Bbox.from_extents(x - r, y - r, x + r, y + r))
    return out


@pytest.mark.parametrize("folder", [CERTS / "demo-hardmax", CERTS / "demo-softmax", CERTS / "equal-means-hardmax"])
def test_phases_counts_sit_beside_the_markers(folder):
    """The count of a shared token ("3", "2") was drawn 5 points up and right of
    its centre, over its own rings and the target square there: each count now
    meets no marker of its panel and stays inside it."""
    from tfcert.cli.plot import figures, read_bundle

    fig = figures(*read_bundle(folder))[0]["phases"]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    counts = 0
    for ax in fig.axes:
        markers, box = marker_boxes(fig, ax), ax.get_window_extent()
        labels = [text.get_window_extent(renderer) for text in ax.texts]
        for i, label in enumerate(labels):
            counts += 1
            assert not any(label.overlaps(m) for m in markers), (ax.get_title(), ax.texts[i].get_text())
            assert box.x0 <= label.x0 and label.x1 <= box.x1 and box.y0 <= label.y0 and label.y1 <= box.y1
            assert not any(label.overlaps(other) for other in labels[i + 1:])
    assert counts >= 4


def test_phases_panel_on_one_coordinate_gets_that_value_as_its_tick():
    """After the separation every y is 1 and after the collapse every x is 0: such a
    panel's axis showed a made-up 0.9..1.1 with fractional ticks; now its one tick is
    the shared value, centred in a range as wide as the other axis's span."""
    from tfcert.cli.plot import figures, read_bundle

    fig = figures(*read_bundle(CERTS / "demo-hardmax"))[0]["phases"]
    panels = {ax.get_title().split(" (")[0]: ax for ax in fig.axes if ax.get_title()}
    separated, collapsed = panels["after separation"], panels["after leaders + collapse"]
    assert list(separated.get_yticks()) == [1.0] and len(separated.get_xticks()) > 2
    assert list(collapsed.get_xticks()) == [0.0] and len(collapsed.get_yticks()) > 2
    for ax, values, limits, other in ((separated, 1.0, separated.get_ylim(), separated.get_xlim()),
                                      (collapsed, 0.0, collapsed.get_xlim(), collapsed.get_ylim())):
        assert limits[0] < values < limits[1]
        assert math.isclose(values - limits[0], limits[1] - values)
        assert (limits[1] - limits[0]) > 0.5 * (other[1] - other[0])  # not a sliver around the value


@pytest.mark.parametrize("folder", [CERTS / "demo-hardmax", CERTS / "demo-softmax", CERTS / "random-d20-wide",
                                    CERTS / "one-sequence-d8"])
@pytest.mark.slow
def test_profile_phase_labels_fit_their_bar_or_sit_beside_it(folder):
    """"separation" spilled past both ends of its one-block bar and "collapse" filled
    its bar edge to edge: a label is inside its bar with room at both ends, or clear
    of every bar (beside it), and inside the strip's width."""
    fig, axes = profile_axes(folder)
    strip = axes["phases"]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bars = [patch.get_window_extent(renderer) for patch in strip.patches]
    labels = [text.get_window_extent(renderer) for text in strip.texts]
    assert len(bars) == len(labels) >= 2
    room = 0.02 * fig.dpi  # at least 0.02 inches either side inside a bar
    strip_box = strip.get_window_extent(renderer)
    for bar, label, text in zip(bars, labels, strip.texts):
        inside = bar.x0 + room <= label.x0 and label.x1 <= bar.x1 - room
        beside = not any(label.overlaps(other) for other in bars)
        assert inside or beside, text.get_text()
        assert strip_box.x0 <= label.x0 and label.x1 <= strip_box.x1, text.get_text()
    names = {text.get_text(): (bar, label) for bar, label, text in zip(bars, labels, strip.texts)}
    if folder == CERTS / "demo-hardmax":
        for name in ("separation", "collapse"):  # wider than their bars at this scale
            bar, label = names[name]
            assert label.x0 >= bar.x1 or label.x1 <= bar.x0, name


def test_softmax_collapse_markers_are_side_by_side():
    """At the collapse block the τ* claim's noise bound (▼) and the noise the snaps
    allow (×) are nearly equal: they were drawn on top of each other. They stand
    side by side, at least a marker apart, within their block."""
    from tfcert.cli.plot import MARKERS

    fig, axes = profile_axes(CERTS / "demo-softmax")
    ax = axes["profile"]
    lines = {line.get_label(): line for line in ax.get_lines()}
    bound, allowed = lines["collapse noise bound at τ*"], lines["noise the snaps allow"]
    [(xb, yb)], [(xa, ya)] = bound.get_xydata(), allowed.get_xydata()
    assert round(xb) == round(xa) and abs(xb - round(xb)) < 0.5 and abs(xa - round(xa)) < 0.5
    (pb, pa) = ax.transData.transform([(xb, yb), (xa, ya)])
    assert math.dist(pb, pa) >= max(bound.get_markersize(), allowed.get_markersize()) * fig.dpi / 72
    others = [x for label, line in lines.items() if label in MARKERS
              and label not in (bound.get_label(), allowed.get_label()) for x, _ in line.get_xydata()]
    assert others and all(abs(x - round(x)) < 0.5 for x in others)  # each within its block
    alone = [x for label in ("hat isolation margin", "snap radius (its plateau)") for x, _ in lines[label].get_xydata()]
    assert alone and all(float(x).is_integer() for x in alone)  # markers alone in their place stay on their block


@pytest.mark.slow
def test_pictures_are_deterministic():
    from tfcert.cli.plot import render_bundle

    for folder in (CERTS / "demo-hardmax", CERTS / "demo-softmax"):
        assert render_bundle(folder).png == render_bundle(folder).png


@pytest.mark.slow
def test_plot_says_which_pictures_it_does_not_draw(tmp_path, capsys):
    """d = 20: no phases.png, said on stderr and under "skipped" with --json (the tour promised both)."""
    from jsonschema import validate

    from tfcert.cli.schemas import load_schema

    rc, doc, err = plot_json(["plot", CERTS / "random-d20-wide", "-o", tmp_path / "w", "--json"], capsys)
    assert rc == 0 and set(doc["files"]) == {"profile"} and "d = 20" in doc["skipped"]["phases"]
    assert err.startswith("note: no phases.png: ") and "d = 20" in err
    validate(doc, load_schema("plot-output"))
    rc, doc, _ = plot_json(["plot", CERTS / "demo-hardmax", "-o", tmp_path / "h", "--json"], capsys)
    assert rc == 0 and doc["skipped"] == {} and set(doc["files"]) == {"phases", "profile"}
    capsys.readouterr()
    assert main(["plot", str(CERTS / "random-d20-wide"), "-o", str(tmp_path / "t")]) == 0
    out, err = capsys.readouterr()
    assert "profile.png" in out and "phases" not in out and "note: no phases.png" in err


def test_bench_width_picture_shows_both_series():
    """Parameters fall by a few per block saved: on twin axes the two curves coincided."""
    from tfcert.bench.bench import width_figure

    trade = [{"width": w, "blocks": b, "parameters": p}
             for w, b, p in [(4, 51, 3360), (8, 31, 3280), (16, 26, 3260), (48, 23, 3248), (80, 22, 3244)]]
    fig = width_figure(trade)
    axes = [ax for ax in fig.axes if ax.get_lines()]
    assert [list(ax.get_lines()[0].get_ydata()) for ax in axes] == [[r["blocks"] for r in trade],
                                                                  [r["parameters"] for r in trade]]
    a, b = (ax.get_window_extent() for ax in axes)
    assert not a.overlaps(b)
