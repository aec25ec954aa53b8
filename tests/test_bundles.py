"""The committed example bundles verify, and the construction rebuilds them
byte-for-byte from their datasets."""
from __future__ import annotations

import json

import pytest
from conftest import REPO

from tfcert.cli.main import main

MANIFEST = json.loads((REPO / "certificates" / "manifest.json").read_text())


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_bundle_verifies(name, capsys):
    folder = REPO / "certificates" / name
    rc = main(["verify", "--model", str(folder / "model.json"), "--dataset", str(folder / "dataset.json"),
               "--certificate", str(folder / "certificate.json")])
    assert rc == 0, capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_bundle_rebuilds_byte_for_byte(name, tmp_path):
    spec = MANIFEST[name]
    source = REPO / "tfcert" / "examples" / spec["dataset"]
    assert main(["construct", str(source), "-o", str(tmp_path), "--attention", spec["attention"],
                 "--width", str(spec["width"])]) == 0
    for file in ("dataset.json", "model.json", "certificate.json"):
        assert (tmp_path / file).read_bytes() == (REPO / "certificates" / name / file).read_bytes(), file


def test_at_least_three_bundles_with_both_attentions():
    assert len(MANIFEST) >= 3
    assert {spec["attention"] for spec in MANIFEST.values()} == {"hardmax", "softmax"}


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_bundle_parameters_fit_float16(name):
    """Every parameter of every bundle is a finite float16 number once rounded: a hat's slopes δ/ε
    (beyond 65504 on every bundle when U was w itself) are stored balanced against its U row and
    biases (construct/hats.py, Hat.gain), so binary16 runs and analyses get past the hats' range."""
    from tfcert.verify.floats import FORMATS, round_nearest
    from tfcert.verify.formats import parse_document, read_model

    path = REPO / "certificates" / name / "model.json"
    model = read_model(parse_document(str(path), path.read_bytes()))
    for block in model.blocks:
        ff, sa = block.ff, block.sa
        numbers = [ff.eta, *ff.b, *(v for row in ff.U for v in row), *(v for row in ff.W for v in row), sa.rho]
        for m in (sa.A, sa.V):
            numbers += [m.scale, *(v for u, w in m.terms for v in (*u, *w))]
        for v in numbers:
            round_nearest(v, FORMATS["binary16"])  # OverflowError beyond 65504 + half an ulp
