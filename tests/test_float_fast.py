"""The float analysis computes its bounds in binary64 rounded upward
(verify/float_analysis.py); tests/rational_float_analysis.py is the same
analysis in rationals. Run exactly — its ``up`` made the identity, so no
bound is rounded at all — the reference gives the analysis's exact value,
and the upward-rounded bound must lie above it (the outward rounding is
right) and within a factor 2 (it is not loose), failing where it fails."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import rational_float_analysis as reference
from conftest import REPO, datasets, write_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfcert.construct.bundle import build
from tfcert.verify.evaluate import Replay
from tfcert.verify.float_analysis import Analysis
from tfcert.verify.floats import FORMATS
from tfcert.verify.formats import load_document, read_dataset, read_model

BUNDLES = sorted(p.parent.name for p in (REPO / "certificates").glob("*/certificate.json"))


def bounds(model, inputs, fmt: str) -> tuple:
    """(fast bound, fast failure), (exact reference bound, its failure)."""
    out = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reference, "up", lambda q: q if q > 0 else reference.ZERO)
        for kind in (Analysis, reference.Analysis):
            analysis = kind(model, inputs, FORMATS[fmt])
            for step in Replay(model, inputs).steps():
                analysis.step(step)
            analysis.finish()
            out.append((analysis.bound, analysis.failure))
    return tuple(out)


def assert_close(fast, exact, what) -> None:
    (bound, failure), (ref_bound, ref_failure) = fast, exact
    assert (failure is None) == (ref_failure is None), (what, failure, ref_failure)
    if bound is not None:
        assert ref_bound <= bound <= 2 * ref_bound, (what, float(bound), float(ref_bound))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("name", BUNDLES)
def test_the_fast_bound_lies_between_the_exact_one_and_twice_it_on_every_bundle(name, fmt):
    folder = REPO / "certificates" / name
    model = read_model(load_document(folder / "model.json"))
    inputs = [p.input for p in read_dataset(load_document(folder / "dataset.json")).pairs]
    fast, exact = bounds(model, inputs, fmt)
    assert_close(fast, exact, (name, fmt))


def test_some_bundle_gets_a_bound_in_each_of_two_formats():
    """The comparison above is not vacuous: bounds exist to compare."""
    folder = REPO / "certificates" / "demo-softmax"
    model = read_model(load_document(folder / "model.json"))
    inputs = [p.input for p in read_dataset(load_document(folder / "dataset.json")).pairs]
    for fmt in ("binary64", "binary32"):
        (bound, _), _ = bounds(model, inputs, fmt)
        assert bound is not None and bound > 0


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(datasets(max_d=5, max_n_seq=4, max_len=4, max_tokens=12), st.sampled_from(["hardmax", "softmax"]),
       st.sampled_from(sorted(FORMATS)))
def test_the_fast_bound_lies_between_the_exact_one_and_twice_it(ds, attention, fmt):
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build(write_json(Path(tmp) / "ds.json", ds), attention)
    model = bundle.construction.model
    inputs = [p.input for p in bundle.dataset.pairs]
    fast, exact = bounds(model, inputs, fmt)
    assert_close(fast, exact, (attention, fmt))
