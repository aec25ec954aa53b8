"""The exact evaluation lemma (verify/floats.py, exact_limit): a sum of products of format
numbers that it calls exact is computed exactly by a float run in every order, with or without
fused multiply-add — checked against an emulator that rounds each operation (tests/floatemu.py) —
and it refuses the sums a format cannot hold. Then what it buys: models whose every layer a
narrow format computes exactly, with a float claim of 0 that real runs meet bit for bit, and a
claim of 0 that fails once one parameter is no longer a number of the format."""
from __future__ import annotations

import json
import random
import tempfile
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import REPO, write_json
from floatemu import ORDERS, Arithmetic, deviation
from flint import fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

from tfcert.cli.main import main
from tfcert.construct.bundle import build
from tfcert.verify.evaluate import Replay
from tfcert.verify.float_analysis import Analysis
from tfcert.verify.floats import FORMATS, exact_limit, exact_sum, grain, round_nearest, valuation
from tfcert.verify.formats import FF, SA, Block, LowRank, Model

NARROW = ("binary16", "bfloat16", "binary32")


def numbers(fmt: str):
    """Numbers of the format with few significant bits, at exponents near 0 (the lemma's domain
    and beyond it)."""
    return st.builds(lambda m, e: round_nearest(fmpq(m) * fmpq(2) ** e, FORMATS[fmt]),
                     st.integers(-2 ** 6, 2 ** 6), st.integers(-12, 8))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(NARROW).flatmap(lambda f: st.tuples(
    st.just(f), st.lists(st.tuples(numbers(f), numbers(f)), min_size=1, max_size=8))), st.integers(0, 2 ** 16))
def test_an_exact_sum_is_exact_in_every_order(case, seed):
    fmt, pairs = case
    exact = sum((a * b for a, b in pairs), fmpq(0))
    if exact_sum([(valuation(a * b), abs(a * b)) for a, b in pairs], FORMATS[fmt]) is None:
        return  # the lemma does not speak: nothing to check (test_the_lemma_speaks_often below)
    for order in ORDERS:
        assert Arithmetic(fmt, order, seed).dot(pairs) == exact, (fmt, order, pairs)


def test_the_lemma_speaks_often_and_refuses_what_a_format_cannot_hold():
    rng, fmt, spoke = random.Random(7), FORMATS["binary16"], 0
    for _ in range(500):
        pairs = [(fmpq(rng.randint(-15, 15)), fmpq(rng.randint(-15, 15), 2 ** rng.randint(0, 3))) for _ in range(4)]
        spoke += exact_sum([(valuation(a * b), abs(a * b)) for a, b in pairs], fmt) is not None
    assert spoke > 250
    # 1024 + 1024 + 1 = 2049 needs 12 bits: binary16 rounds it (to 2048)
    assert exact_sum([(10, fmpq(1024)), (10, fmpq(1024)), (0, fmpq(1))], fmt) is None
    assert round_nearest(fmpq(2049), fmt) != 2049
    # a grid finer than the subnormal spacing: a product that underflows
    assert exact_limit(-25, fmt) is None and exact_limit(-24, fmt) == fmpq(2) ** -13
    assert exact_sum([(None, fmpq(0))], fmt) is not None  # a sum of zeros is exact


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(("binary16", "bfloat16", "binary32", "binary64")), st.integers(-2 ** 20, 2 ** 20),
       st.integers(-160, 40), st.fractions(0, 1))
def test_every_number_above_a_lower_bound_is_a_multiple_of_its_grain(fmt, m, e, share):
    f = FORMATS[fmt]
    try:
        v = round_nearest(fmpq(m) * fmpq(2) ** e, f)
    except OverflowError:
        return
    lower = abs(v) * fmpq(share.numerator, share.denominator)
    if v:
        assert (v / fmpq(2) ** grain(lower, f)).q == 1, (fmt, v, lower)


def _bundle(doc: dict, attention: str = "hardmax"):
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build(write_json(Path(tmp) / "ds.json", doc), attention)
    claims = {c["format"]: Fraction(c["bound"]) for c in json.loads(bundle.files["certificate.json"])
              ["phases"][-1]["claims"] if c["kind"] == "float"}
    return bundle, claims


SMALL_INTEGERS = {"format": "tfcert.dataset/1", "d": 5, "pairs": [
    {"input": [["1", "2", "0", "-3", "1"], ["3", "-1", "2", "0", "0"], ["0", "0", "1", "2", "-2"]],
     "output": [["1", "1", "1", "0", "2"], ["2", "0", "-1", "1", "1"]]},
    {"input": [["2", "2", "2", "1", "0"], ["-1", "4", "0", "0", "3"]], "output": [["0", "3", "1", "-1", "0"]]},
    {"input": [["1", "3", "0", "5", "-1"], ["5", "5", "-3", "2", "2"]], "output": [["-2", "1", "0", "4", "1"]]}]}


def test_a_model_of_small_integers_runs_exactly_in_every_format_and_order():
    """Every layer exact in bfloat16: the claim is 0 in all four formats, and the emulated runs
    in every order return the targets bit for bit."""
    bundle, claims = _bundle(SMALL_INTEGERS)
    assert claims == {f: 0 for f in ("binary64", "binary32", "binary16", "bfloat16")}
    model, dataset = bundle.construction.model, bundle.dataset
    replay = Replay(model, [p.input for p in dataset.pairs])
    for _ in replay.steps():
        pass
    for fmt in claims:
        for order in ORDERS:
            assert deviation(model, [p.input for p in dataset.pairs], replay.sequences(), fmt, order, 3) == 0


def test_a_claim_of_zero_fails_where_a_target_is_not_a_number_of_the_format(tmp_path):
    """The same dataset with one target coordinate 1/3, which no binary format holds: every
    float run rounds it, so no claim of 0 is true; a certificate stating 0 for every format
    fails verify (exit 1), and the one construct states verifies (exit 0)."""
    doc = json.loads(json.dumps(SMALL_INTEGERS))
    doc["pairs"][0]["output"][0][0] = "1/3"
    bundle, claims = _bundle(doc)
    assert claims["binary64"] > 0 and claims["binary32"] > 0
    for name, data in bundle.files.items():
        (tmp_path / name).write_bytes(data)
    assert main(["verify", str(tmp_path), "-q"]) == 0
    cert = json.loads(bundle.files["certificate.json"])
    for claim in cert["phases"][-1]["claims"]:
        if claim["kind"] == "float":
            claim["bound"] = "0"
    (tmp_path / "certificate.json").write_text(json.dumps(cert))
    assert main(["verify", str(tmp_path), "-q"]) == 1


def test_the_one_sequence_bundle_claims_zero_in_every_format():
    cert = json.loads((REPO / "certificates" / "one-sequence-d8" / "certificate.json").read_text())
    claims = {c["format"]: c["bound"] for c in cert["phases"][-1]["claims"] if c["kind"] == "float"}
    assert claims == {"binary64": "0", "binary32": "0", "binary16": "0", "bfloat16": "0"}


def test_a_unit_known_exactly_has_the_grain_of_its_own_value():
    """One unit at 64·t − 889/512 on t = 921/32768: the pre-activation, 1/16, is computed exactly
    (Sterbenz) from exact operands, so the float value is 1/16 itself — a multiple of 2^-4, not
    only of the operands' 2^-9 — and W = 87/4 times it is 87/64, seven bits: the FF output is
    exact in binary16 and the bound 0, which every emulated order meets. From the operands'
    grain alone the product would need twelve bits and the bound would not be 0."""
    Q, zero = fmpq, LowRank(fmpq(0))
    ff = FF(Q(1), ((Q(64), Q(0)),), (Q(-889, 512),), ((Q(0),), (Q(87, 4),)))
    model = Model(2, "hardmax", (Block(ff, SA(Q(1), zero, zero)),))
    inputs = [((Q(921, 32768), Q(0)),)]
    replay = Replay(model, inputs)
    analysis = Analysis(model, inputs, FORMATS["binary16"])
    for step in replay.steps():
        analysis.step(step)
    analysis.finish()
    assert replay.sequences() == (((Q(921, 32768), Q(87, 64)),),)
    assert analysis.failure is None and analysis.bound == 0
    for order in ORDERS:
        assert deviation(model, inputs, replay.sequences(), "binary16", order, 3) == 0
