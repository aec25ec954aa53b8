"""tfcert plot: every bundle that verifies is drawn (one token, coordinates
past float's range, any d, both attentions), and a plot that exits 2 writes
nothing."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import REPO
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tfcert.construct.bundle import build
from tfcert.main import main
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
