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
