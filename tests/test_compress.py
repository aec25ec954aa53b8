"""The compression phase (construct/compress.py): coordinates of many scales are mapped, each
on its own, by an increasing piecewise linear function, so that one projection can tell the
tokens apart in binary32; data within one range are left alone."""
from __future__ import annotations

import json
import tempfile
from fractions import Fraction
from pathlib import Path

from conftest import REPO, write_json
from floatemu import ORDERS, deviation
from flint import fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

from tfcert.construct.bundle import build
from tfcert.construct.compress import RANGE, compress
from tfcert.verify.evaluate import Replay
from tfcert.verify.formats import Dataset, Pair, load_document, read_dataset

# tokens that share a large coordinate and differ in a small one: 8e2 beside -6e-5 and -3e-5, 9e6
# beside 9e-6 and 8e-6 — no projection of the raw tokens keeps them apart in binary32
MIXED = {"format": "tfcert.dataset/1", "d": 2, "pairs": [
    {"input": [["8e2", "-6e-5"]], "output": [["1", "2"]]},
    {"input": [["8e2", "-3e-5"]], "output": [["-1", "0"]]},
    {"input": [["8e2", "-4e6"]], "output": [["3", "1"]]},
    {"input": [["7e-5", "-3e-5"]], "output": [["0", "-2"]]},
    {"input": [["9e6", "9e-6"]], "output": [["2", "2"]]},
    {"input": [["9e6", "8e-6"]], "output": [["-2", "-2"]]}]}


def test_tokens_of_many_scales_get_a_binary32_claim_that_every_order_meets():
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build(write_json(Path(tmp) / "ds.json", MIXED))
    cert = json.loads(bundle.files["certificate.json"])
    assert cert["phases"][0]["name"] == "compress" and cert["phases"][0]["blocks"][1] > 0
    claims = {c["format"]: Fraction(c["bound"]) for c in cert["phases"][-1]["claims"] if c["kind"] == "float"}
    assert claims["binary32"] <= Fraction(1, 1000) * 4  # 1e-3·(1 + max|y|)
    model, inputs = bundle.construction.model, [p.input for p in bundle.dataset.pairs]
    replay = Replay(model, inputs)
    for _ in replay.steps():
        pass
    for order in ORDERS:
        seen = deviation(model, inputs, replay.sequences(), "binary32", order, 5)
        assert Fraction(int(seen.p), int(seen.q)) <= claims["binary32"], order


SCALES = st.builds(lambda m, e: fmpq(m) * fmpq(10) ** e, st.integers(-9, 9), st.integers(-6, 6))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(SCALES, SCALES), min_size=2, max_size=12, unique=True))
def test_each_coordinate_keeps_its_order_and_distinct_values_stay_distinct(tokens):
    data = Dataset(2, tuple(Pair(j, (x,), ((fmpq(0), fmpq(0)),)) for j, x in enumerate(tokens)))
    phase = compress(data)
    out = [s[0] for s in phase.tokens]
    for c in range(2):
        pairs = sorted(zip((x[c] for x in tokens), (y[c] for y in out)), key=lambda p: p[0])
        for (x1, y1), (x2, y2) in zip(pairs, pairs[1:]):
            assert (x1 < x2) == (y1 < y2) and (x1 == x2) == (y1 == y2)
    sizes = [abs(v) for x in tokens for v in x if v]
    if phase.blocks:  # only where the range is wide (and no projection of the raw tokens has room)
        assert max(sizes) > RANGE * min(sizes)
        squeezed = [abs(v) for y in out for v in y if v]
        assert max(squeezed) <= 32 * min(sizes)  # about (3/4)·K·b: within a few orders of the smallest


def test_data_within_one_range_are_not_compressed():
    data = read_dataset(load_document(REPO / "tfcert" / "examples" / "demo.json"))
    assert compress(data).blocks == ()
    cert = json.loads((REPO / "certificates" / "demo-hardmax" / "certificate.json").read_text())
    assert "compress" not in [p["name"] for p in cert["phases"]]
