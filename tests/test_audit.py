"""``tfcert audit``: per-sequence verdicts and Hausdorff distances, ties,
certificates that ``verify`` accepts exactly when the model interpolates."""
from __future__ import annotations

import copy
import json
from fractions import Fraction

import pytest
from conftest import REPO, dataset_json, run, write_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_construct_property import EQUAL_MEANS

from tfcert.construct.bundle import build
from tfcert.cli.main import main


@pytest.fixture(scope="module", params=["demo", "equal-means"])
def bundle(request, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp(request.param)
    source = (REPO / "tfcert" / "examples" / "demo.json" if request.param == "demo"
              else write_json(tmp / "source.json", EQUAL_MEANS))
    b = build(source)
    paths = {}
    for name, data in b.files.items():
        paths[name.split(".")[0]] = tmp / name
        paths[name.split(".")[0]].write_bytes(data)
    return {"paths": paths, **{k.split(".")[0]: json.loads(v) for k, v in b.files.items()}}


def audit(model, dataset, capsys, *extra) -> tuple[int, dict]:
    rc, out, err = run(["audit", "--model", model, "--dataset", dataset, "--json", *extra], capsys)
    assert err == ""
    return rc, json.loads(out)  # the whole of stdout is one JSON document


def verify(model, dataset, cert, capsys) -> int:
    rc, out, err = run(["verify", "--model", model, "--dataset", dataset, "--certificate", cert], capsys)
    assert all(line.startswith("warning: ") for line in err.splitlines()), err
    return rc


def test_audit_of_a_construction(bundle, tmp_path, capsys):
    p = bundle["paths"]
    cert = tmp_path / "audit-cert.json"
    rc, report = audit(p["model"], p["dataset"], capsys, "-o", cert)
    assert rc == 0 and report["interpolates"] is True
    n = len(bundle["dataset"]["pairs"])
    assert [s["sequence"] for s in report["sequences"]] == list(range(n))
    assert all(s["exact"] and s["hausdorff_squared"] == "0" and s["hausdorff"] == 0 for s in report["sequences"])
    # the construction's one scored attention layer is the collapse, with no tie
    collapse = next(c["block"] for ph in bundle["certificate"]["phases"] for c in ph["claims"] if c["kind"] == "argmax")
    assert [l["block"] for l in report["attention_layers"]] == [collapse]
    assert report["attention_layers"][0]["ties"] == []
    assert Fraction(report["attention_layers"][0]["min_gap"]) > 0
    sep = next(c["block"] for ph in bundle["certificate"]["phases"] for c in ph["claims"]
               if c["kind"] == "uniform_attention")
    assert report["uniform_attention_blocks"] == [sep]
    size = next(c for ph in bundle["certificate"]["phases"] for c in ph["claims"] if c["kind"] == "size")
    assert report["size"] == {k: v for k, v in size.items() if k != "kind"}
    assert verify(p["model"], p["dataset"], cert, capsys) == 0
    # the audit certificate's claims are the checker's: argmax with the collapse's gaps
    claims = json.loads(cert.read_text())["phases"][0]["claims"]
    kinds = [c["kind"] for c in claims]
    assert kinds == ["uniform_attention", "argmax", "exact", "size"]


def test_audit_human_output(bundle, capsys):
    p = bundle["paths"]
    rc, out, err = run(["audit", "--model", p["model"], "--dataset", p["dataset"]], capsys)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[-1] == "verdict: interpolates exactly"
    rows = [l.split() for l in lines[1:1 + len(bundle["dataset"]["pairs"])]]
    assert all(r[1] == "exact" and float(r[2]) == 0 for r in rows)


def corrupt_interpolation_hat(bundle, delta: Fraction, hat: int = 0, row: int = 0):
    """Change one W entry (unit 0, active on the plateau) of an interpolation
    snap; returns (model, the sequences that snap moves)."""
    hats = [c for ph in bundle["certificate"]["phases"] if ph["name"] == "interpolation"
            for c in ph["claims"] if c["kind"] == "snap"]
    claim = hats[hat % len(hats)]
    model = copy.deepcopy(bundle["model"])
    W = model["blocks"][claim["block"]]["ff"]["W"]
    v = Fraction(W[row][claim["units"][0]]) + delta
    W[row][claim["units"][0]] = f"{v.numerator}/{v.denominator}"
    return model, claim


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(hat=st.integers(0, 20), row=st.integers(0, 1),
       delta=st.fractions(-3, 3, max_denominator=10**6).filter(lambda x: x != 0))
def test_audit_of_a_corrupted_model(bundle, hat, row, delta, tmp_path_factory, capsys):
    tmp = tmp_path_factory.mktemp("bad")
    model, claim = corrupt_interpolation_hat(bundle, delta, hat, row)
    model_path = write_json(tmp / "model.json", model)
    cert = tmp / "cert.json"
    rc, report = audit(model_path, bundle["paths"]["dataset"], capsys, "-o", cert)
    assert rc == 1 and report["interpolates"] is False
    # The snap's own tokens miss their target; with Σ W ≠ 0 the group is also a
    # ramp beyond its window, so tokens further along its coordinate may move too.
    moved = {j for j, _ in claim["moves"]}
    failing = {s["sequence"] for s in report["sequences"] if not s["exact"]}
    assert moved <= failing
    for s in report["sequences"]:
        if s["sequence"] in failing:
            assert Fraction(s["hausdorff_squared"]) > 0 and s["hausdorff"] > 0
        else:
            assert s["hausdorff_squared"] == "0" and s["hausdorff"] == 0
    assert verify(model_path, bundle["paths"]["dataset"], cert, capsys) == 1
    # the human form names the failing sequence
    rc, out, _ = run(["audit", "--model", model_path, "--dataset", bundle["paths"]["dataset"]], capsys)
    assert rc == 1 and out.splitlines()[-1] == "verdict: does NOT interpolate"
    rows = {int(l.split()[0]): l.split()[1] for l in out.splitlines()[1:] if l.split() and l.split()[0].isdigit()}
    assert {j for j, v in rows.items() if v == "FAIL"} == failing


def tie_model() -> dict:
    """d = 2, one block: identity FF, SA with ρ = 0, A = I, V = I."""
    return {"format": "tfcert.model/1", "d": 2, "attention": "hardmax",
            "blocks": [{"ff": {"eta": "1", "U": [], "b": [], "W": [[], []]},
                        "sa": {"rho": "0", "A": {"scale": "1", "low_rank": []},
                               "V": {"scale": "1", "low_rank": []}}}]}


def test_audit_reports_ties(tmp_path, capsys):
    # Sequence [(1,1), (1,0), (0,1)]: token 1 scores (1, 1, 0) — a tie between
    # tokens 0 and 1; token 2 scores (1, 0, 1) — a tie between 0 and 2; token 0
    # scores (2, 1, 1): no tie. Hardmax averages ties, so the outputs are
    # (1,1), (1,1/2), (1/2,1). Pair 1 repeats pair 0 (dropped with a warning),
    # pair 2 has no tie: ties are named by the sequence's index in the file.
    X = [(1, 1), (1, 0), (0, 1)]
    Y = [(1, 1), (1, Fraction(1, 2)), (Fraction(1, 2), 1)]
    ds = write_json(tmp_path / "ds.json", dataset_json(2, [
        ([(3, 0), (0, 1)], [(9, 0), (0, 1)]), (X, Y), (list(reversed(X)), list(reversed(Y)))]))
    model = write_json(tmp_path / "model.json", tie_model())
    cert = tmp_path / "cert.json"
    capsys.readouterr()
    rc = main(["audit", "--model", str(model), "--dataset", str(ds), "--json", "-o", str(cert)])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert len(err.splitlines()) == 1 and err.startswith("warning: ") and "$.pairs[2]" in err
    layers = report["attention_layers"]
    assert [l["block"] for l in layers] == [0]
    assert layers[0]["ties"] == [[1, 1], [1, 2]]  # (sequence, token) in block 0
    assert layers[0]["min_gap"] == "1"
    # sequence 0: each token attends to itself, (3,0) ↦ (3,0), which is not its target (9,0)
    verdicts = {s["sequence"]: s["exact"] for s in report["sequences"]}
    assert verdicts == {0: False, 1: True}
    assert rc == 1
    assert verify(model, ds, cert, capsys) == 1
    # human form: block, count and [sequence,token] of every tie
    rc, out, _ = run(["audit", "--model", model, "--dataset", ds], capsys)
    assert "attention block 0: least argmax gap 1, 2 tie(s): [1,1] [1,2]" in out.splitlines()


def test_tie_model_that_interpolates(tmp_path, capsys):
    """Ties do not stop a model from interpolating: exit 0, ties reported, and
    the audit's certificate (argmax claim with ties = 2) verifies."""
    X = [(1, 1), (1, 0), (0, 1)]
    Y = [(1, 1), (1, Fraction(1, 2)), (Fraction(1, 2), 1)]
    ds = write_json(tmp_path / "ds.json", dataset_json(2, [(X, Y)]))
    model = write_json(tmp_path / "model.json", tie_model())
    cert = tmp_path / "cert.json"
    rc, report = audit(model, ds, capsys, "-o", cert)
    assert rc == 0 and report["interpolates"]
    assert report["attention_layers"] == [{"block": 0, "min_gap": "1", "ties": [[0, 1], [0, 2]]}]
    assert verify(model, ds, cert, capsys) == 0
    argmax = next(c for c in json.loads(cert.read_text())["phases"][0]["claims"] if c["kind"] == "argmax")
    assert argmax["ties"] == 2
    assert argmax["tokens"] == [[[[0], "1"], [[0, 1], "1"], [[0, 2], "1"]]]


def test_audit_json_is_one_document_for_failures_too(bundle, tmp_path, capsys):
    model, _ = corrupt_interpolation_hat(bundle, Fraction(1, 3))
    model_path = write_json(tmp_path / "model.json", model)
    rc, out, err = run(["audit", "--model", model_path, "--dataset", bundle["paths"]["dataset"], "--json"], capsys)
    assert rc == 1 and err == ""
    doc = json.loads(out)
    assert set(doc) == {"interpolates", "sequences", "attention_layers", "uniform_attention_blocks", "size"}



def test_no_enclosure_means_not_certified(bundle, monkeypatch):
    """A temperature at which no enclosure can be formed (exp far out of
    range: ArithmeticError in the replay) is not certified — the bisection
    goes on, and the audit reports instead of failing with an error."""
    from tfcert.audit import audit as audit_module
    from flint import fmpq

    from tfcert.verify.formats import load_document, read_dataset, read_model

    model = read_model(load_document(bundle["paths"]["model"]))
    dataset = read_dataset(load_document(bundle["paths"]["dataset"]))

    def out_of_range(self):
        raise ArithmeticError("exp out of range")
        yield

    monkeypatch.setattr(audit_module.Replay, "steps", out_of_range)
    assert audit_module.certified_at(model, dataset, fmpq(1, 2 ** 60)) is False
