"""The measurement tables of tests/data/tables/ (the float survey's --tables) are valid datasets
of exact numbers, and where scikit-learn is installed, exactly what tests/make_tables.py builds
from the CSV files it ships."""
from __future__ import annotations

import json

import pytest
from conftest import REPO

from tfcert.verify.formats import load_document, read_dataset

TABLES = REPO / "tests" / "data" / "tables"
SHAPES = {"digits": (64, 250), "iris": (4, 150), "wine": (13, 178)}  # d, tokens (tests/data/tables/README.md)


def test_the_tables_are_exact_valid_datasets():
    assert sorted(p.stem for p in TABLES.glob("*.json")) == sorted(SHAPES)
    for name, (d, tokens) in SHAPES.items():
        path = TABLES / f"{name}.json"
        data = read_dataset(load_document(path))
        assert (data.d, sum(len(p.input) for p in data.pairs), data.warnings) == (d, tokens, ())
        values = [v for p in json.loads(path.read_text())["pairs"] for side in p.values() for t in side for v in t]
        assert all(isinstance(v, str) for v in values)  # decimal or p/q text: no float read back through binary64


@pytest.mark.slow  # importing scikit-learn takes 1.5 s or more
def test_make_tables_rebuilds_them_byte_for_byte():
    pytest.importorskip("sklearn")
    import make_tables

    for name in SHAPES:
        assert make_tables.dumps(make_tables.TABLES[name]()) == (TABLES / f"{name}.json").read_text()
