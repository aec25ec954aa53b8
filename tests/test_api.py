"""The notebook API: tfcert.api.construct / verify / audit on numpy arrays,
lists, paths and bundles; float64 values read exactly; HTML tables."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from tfcert import api
from tfcert.api import Bundle, Report, dataset_json, number_text
from tfcert.errors import InputError

HARDMAX = REPO / "certificates" / "demo-hardmax"
PAIRS = [(np.array([[1.0, 0.0], [0.0, 0.5], [0.1, 3.0]]), np.array([[3.0, -1.25]])),
         ([[1, 0], [-1, 1]], [[0, 0], ["1/3", 2]])]


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return api.construct(PAIRS)


@given(st.floats(allow_nan=False, allow_infinity=False))
@settings(max_examples=200, deadline=None)
def test_float64_read_exactly(x):
    assert Fraction(number_text(np.float64(x), "x")) == Fraction(x)


def test_non_finite_and_booleans_refused():
    for bad in (float("nan"), np.inf, True):
        with pytest.raises(InputError):
            number_text(bad, "x")


def test_dataset_from_arrays_and_lists():
    value = dataset_json(PAIRS)
    assert value["d"] == 2 and value["pairs"][0]["input"][2][0] == "3602879701896397/36028797018963968"  # 0.1
    assert value["pairs"][1]["output"] == [["0", "0"], ["1/3", "2"]]


def test_construct_verify_audit(bundle, tmp_path):
    assert isinstance(bundle, Bundle) and bundle.report.ok
    report = api.verify(bundle)
    assert isinstance(report, Report) and report.ok and report.failures == []
    assert report.to_json()["claims"] == len(report.results)
    assert "claims checked: all claims hold" in str(report)
    audit = api.audit(bundle)
    assert audit.interpolates and audit.to_json()["interpolates"] is True
    folder = bundle.write(tmp_path / "b")
    assert api.verify(folder).ok
    assert api.verify(folder / "model.json", folder / "dataset.json", folder / "certificate.json").ok
    assert api.audit(folder / "model.json", PAIRS).interpolates  # the dataset as arrays again
    with pytest.raises(InputError, match="already holds a bundle") as refused:
        bundle.write(folder)
    assert str(refused.value).endswith("use force=True to replace it")  # the API's spelling, not --force
    bundle.write(folder, force=True)


def test_softmax_and_temperature():
    b = api.construct(PAIRS[:1], attention="softmax")
    tau = Fraction(b.certificate["tau_star"])
    assert api.audit(b, temperature=tau / 2).interpolates


def test_html(bundle, tmp_path):
    assert bundle._repr_html_().startswith("<table>") and "interpolation" in bundle._repr_html_()
    assert "all claims hold" in api.verify(bundle)._repr_html_()
    assert "<td>exact</td>" in api.audit(bundle)._repr_html_()
    cert = json.loads((HARDMAX / "certificate.json").read_text())
    cert["phases"][1]["claims"][1]["min_gap"] = "1"
    (tmp_path / "certificate.json").write_text(json.dumps(cert))
    failing = api.verify(HARDMAX / "model.json", HARDMAX / "dataset.json", tmp_path / "certificate.json")
    assert not failing.ok and "FAIL: min_gap" in failing._repr_html_()


def test_one_name_one_thing():
    """The subpackages are plain packages, the notebook's functions live in tfcert.api, and the
    checker's entry has a name of its own: no name means two things."""
    import types

    import tfcert
    import tfcert.audit
    import tfcert.construct.build
    import tfcert.verify.check

    for package in (tfcert.construct, tfcert.verify, tfcert.audit):
        assert type(package) is types.ModuleType and not callable(package)
    assert type(tfcert) is types.ModuleType
    assert all(callable(f) for f in (api.construct, api.verify, api.audit))
    assert not hasattr(tfcert.verify.check, "verify") and callable(tfcert.verify.check.check_certificate)


def test_missing_arguments():
    with pytest.raises(InputError, match="required"):
        api.verify(HARDMAX / "model.json")


def test_numbers_are_exact_or_refused():
    """Every number type is read by its exact value (Decimal, numpy floats of any width,
    FLINT rationals) or refused (complex, numpy booleans); never rounded through float."""
    from decimal import Decimal

    from flint import fmpq

    assert number_text(Decimal("0.1"), "x") == "1/10"
    assert number_text(np.float32(0.1), "x") == str(Fraction(float(np.float32(0.1))))
    assert number_text(fmpq(1, 3), "x") == "1/3"
    third = np.longdouble(1) / 3
    p, q = third.as_integer_ratio()
    assert number_text(third, "x") == f"{p}/{q}"
    for bad in (np.complex128(1 + 2j), 1 + 2j, np.bool_(True), Decimal("NaN"), np.longdouble("inf"), object()):
        with pytest.raises(InputError):
            number_text(bad, "x")


@pytest.mark.parametrize("pairs", [
    [(np.array([1.0, 2.0]), np.array([1.0, 2.0]))],  # 1-D arrays: a token is not a list
    [(np.eye(2), np.eye(2)[:1], None)],  # three items
    [{"input": np.eye(2)}],  # no "output"
    5,  # not a list
])
def test_malformed_pairs_raise_input_error(pairs):
    with pytest.raises(InputError):
        dataset_json(pairs)


@pytest.mark.parametrize("pairs, path", [
    ([(np.zeros((0, 2)), np.eye(2)[:1])], "$.pairs[0].input"),
    ([([], [])], "$.pairs[0].input"),
    ([(np.eye(2), np.eye(2)[:1]), (np.zeros((0, 2)), np.eye(2)[:1])], "$.pairs[1].input"),
    ([(np.eye(2), np.zeros((0, 2)))], "$.pairs[0].output"),
])
def test_an_empty_sequence_is_named(pairs, path):
    """The sequence that is empty, as a file's reader names it; not "$.d: 0 is out of range"."""
    with pytest.raises(InputError) as refused:
        api.construct(pairs)
    assert str(refused.value) == f"<dataset>: {path}: empty sequence"


@pytest.mark.parametrize("tau", [0, 0.0, "0", -1, "-1/8"])
def test_audit_refuses_a_temperature_not_above_zero(tau):
    """As the CLI does (--temperature: must be > 0); 0 used to mean the model's own τ."""
    with pytest.raises(InputError, match="must be > 0"):
        api.audit(str(REPO / "certificates" / "demo-softmax"), temperature=tau)
